/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_tls_corpus.c - the TLS record path's fuzzing invariants
 * (tests/fuzz/tls_check.c) on every file of tests/fuzz/tls_corpus/: real
 * ClientHellos and server flights recorded from openssl s_client and
 * s_server, truncated and mutated ones, and what the fuzzer found.  Each
 * goes whole and in pieces into a server session and a client session.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/tls_check.h"
#include "runner.h"

#ifndef TLS_CORPUS_DIR
#define TLS_CORPUS_DIR "tests/fuzz/tls_corpus"
#endif

static int setup(void) {
  char why[256];
  if (tls_check_init(why, sizeof why) != 0) {
    printf("\n  tls_check_init: %s\n", why);
    return -1;
  }
  return 0;
}

static int teardown(void) {
  tls_check_fini();
  return 0;
}

/* Every corpus file (the seeds and the fuzzer's findings) passes the
 * invariants: documented results only, no plaintext before the handshake
 * or after a failure (and, under ASan, no leak). */
static void test_corpus(void) {
  const char *dir = getenv("TLS_CORPUS_DIR");
  if (dir == NULL) dir = TLS_CORPUS_DIR;
  DIR *d = opendir(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  static unsigned char data[65536];
  char name[4096], why[256];
  unsigned files = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(name, sizeof name, "%s/%s", dir, e->d_name);
    FILE *f = fopen(name, "rb");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f == NULL) continue;
    size_t n = fread(data, 1, sizeof data, f);
    CU_ASSERT_EQUAL(ferror(f), 0);
    fclose(f);
    int rc = tls_check_input(data, n, why, sizeof why);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0) printf("\n  %s: %s\n", name, why);
    files++;
  }
  closedir(d);
  CU_ASSERT(files >= 20);
}

/* The empty input and single bytes: the sessions wait for more, never a
 * result outside the interface. */
static void test_tiny(void) {
  char why[256];
  CU_ASSERT_EQUAL(tls_check_input(NULL, 0, why, sizeof why), 0);
  for (unsigned b = 0; b < 256; b++) {
    unsigned char one = (unsigned char)b;
    int rc = tls_check_input(&one, 1, why, sizeof why);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0) printf("\n  byte 0x%02x: %s\n", b, why);
  }
}

static CU_TestInfo corpus_tests[] = {
    {"fuzz corpus through the invariants", test_corpus},
    {"empty and one-byte inputs", test_tiny},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t corpus_suite = {
    "tls: the record path's fuzz corpus", corpus_tests, 120, NULL};

int main(int argc, char **argv) {
  if (setup() != 0) return 1;
  const taxi_test_suite_t *const suites[] = {&corpus_suite};
  int rc = taxi_test_run("TLS fuzz corpus", suites, 1, argc, argv);
  teardown();
  return rc;
}
