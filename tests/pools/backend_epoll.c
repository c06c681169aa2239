/* SPDX-License-Identifier: Apache-2.0 */
/* tests/pools/backend_epoll.c - the pool suites on epoll. */
#include "suites.h"

int main(int argc, char **argv) { return taxi_pools_main("epoll", argc, argv); }
