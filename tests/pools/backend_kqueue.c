/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_kqueue.c - the pool suites on kqueue. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_pools_main("kqueue", argc, argv);
}
