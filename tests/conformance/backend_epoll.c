/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_epoll.c - the conformance suites on epoll. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("epoll", argc, argv);
}
