/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_apr.c - the pool suites on "apr". */
#include "suites.h"

int main(int argc, char **argv) { return taxi_pools_main("apr", argc, argv); }
