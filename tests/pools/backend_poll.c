/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_poll.c - the pool suites on poll. */
#include "suites.h"

int main(int argc, char **argv) { return taxi_pools_main("poll", argc, argv); }
