/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_poll.c - the conformance suites on poll. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("poll", argc, argv);
}
