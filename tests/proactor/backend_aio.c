/* SPDX-License-Identifier: Apache-2.0 */
/* tests/proactor/backend_aio.c - the proactor suites on "aio". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_proactor_main("aio", argc, argv);
}
