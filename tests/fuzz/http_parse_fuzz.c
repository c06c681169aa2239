/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/http_parse_fuzz.c - libFuzzer target for the HTTP request
 * parser (examples/jaws/http_parse.c): every input goes through the
 * invariants of http_check.c; a broken one aborts with the reason.
 * Built and run by `make fuzz-http FUZZ_SECONDS=N`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "http_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[256];
  if (http_check_input(data, size, why, sizeof why) != 0) {
    fprintf(stderr, "http_parse invariant broken: %s\n", why);
    abort();
  }
  return 0;
}
