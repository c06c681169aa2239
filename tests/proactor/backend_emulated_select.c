/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_emulated_select.c - the proactor suites on
 * "emulated:select". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("emulated:select", argc, argv);
}
