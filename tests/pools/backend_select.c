/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_select.c - the pool suites on select. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_pools_main("select", argc, argv);
}
