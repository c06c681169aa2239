/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_apr_select.c - the conformance suites on
 * "apr:select". */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("apr:select", argc, argv);
}
