/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_emulated.c - the proactor suites on "emulated". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("emulated", argc, argv);
}
