/* SPDX-License-Identifier: Apache-2.0 */
/* tests/conformance/backend_apr_poll.c - the conformance suites on "apr:poll".
 */
#include "suites.h"

int main(int argc, char **argv) {
  return taxi_conformance_main("apr:poll", argc, argv);
}
