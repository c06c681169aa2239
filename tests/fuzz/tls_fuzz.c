/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/tls_fuzz.c - libFuzzer target for the TLS record path: every
 * input is the peer's ciphertext to a server session and to a client
 * session (tls_check.c); a broken invariant aborts with the reason.
 * Built and run by `make fuzz-tls FUZZ_SECONDS=N`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tls_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void done(void) { tls_check_fini(); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char why[256];
  (void)argc;
  (void)argv;
  if (tls_check_init(why, sizeof why) != 0) {
    fprintf(stderr, "tls_fuzz: %s\n", why);
    abort();
  }
  if (atexit(done) != 0) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char why[256];
  if (tls_check_input(data, size, why, sizeof why) != 0) {
    fprintf(stderr, "TLS invariant broken: %s\n", why);
    abort();
  }
  return 0;
}
