/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_select.c - the conformance suites on select. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("select", argc, argv);
}
