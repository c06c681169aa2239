/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_wsapoll.c - the pool suites on wsapoll. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_pools_main("wsapoll", argc, argv);
}
