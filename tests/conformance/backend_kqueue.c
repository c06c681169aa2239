/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_kqueue.c - the conformance suites on kqueue. */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("kqueue", argc, argv);
}
