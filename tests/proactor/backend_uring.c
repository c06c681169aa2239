/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_uring.c - the proactor suites on "uring". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("uring", argc, argv);
}
