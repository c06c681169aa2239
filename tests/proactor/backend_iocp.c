/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_iocp.c - the proactor suites on "iocp". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("iocp", argc, argv);
}
