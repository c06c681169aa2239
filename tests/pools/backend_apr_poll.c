/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_apr_poll.c - the pool suites on "apr:poll". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_pools_main("apr:poll", argc, argv);
}
