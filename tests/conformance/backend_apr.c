/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_apr.c - the conformance suites on "apr". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("apr", argc, argv);
}
