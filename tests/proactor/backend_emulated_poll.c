/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_emulated_poll.c - the proactor suites on
 * "emulated:poll". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("emulated:poll", argc, argv);
}
