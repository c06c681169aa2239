/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_wsapoll.c - the conformance suites on wsapoll. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("wsapoll", argc, argv);
}
