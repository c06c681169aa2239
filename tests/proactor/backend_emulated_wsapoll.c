/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_emulated_wsapoll.c - the proactor suites on
 * "emulated:wsapoll". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("emulated:wsapoll", argc, argv);
}
