/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_apr_select.c - the pool suites on "apr:select". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_pools_main("apr:select", argc, argv);
}
