/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_quote.c - the quote logic of examples/quote (quote.c): the
 * table file's format and its errors, lookups, and the answer to every
 * kind of request, malformed ones included, whole, batched and cut short.
 * The servers' models are run by tests/quote.sh.
 */
#include <stdio.h>
#include <string.h>

#include "../examples/quote/quote.h"
#include "runner.h"

#define TABLE_FILE "test_quote_table.tmp"

static int write_table(const char *text) {
  FILE *f = fopen(TABLE_FILE, "w");
  if (f == NULL) return -1;
  fputs(text, f);
  return fclose(f);
}

/* Load text as a table; returns what quote_table_load returned. */
static int load(struct quote_table *t, const char *text, char *err,
                size_t size) {
  CU_ASSERT_EQUAL_FATAL(write_table(text), 0);
  int rc = quote_table_load(t, TABLE_FILE, err, size);
  remove(TABLE_FILE);
  return rc;
}

static const char *const good =
    "# a comment\n"
    "\n"
    "IBM 123.45\n"
    "HP 7\n"
    "BRK.A 500000.5\n"
    "X-Y 0.01\n";

static void test_load_and_lookup(void) {
  struct quote_table t;
  char err[200];
  CU_ASSERT_EQUAL_FATAL(load(&t, good, err, sizeof err), 0);
  CU_ASSERT_EQUAL(t.count, 4);
  CU_ASSERT_EQUAL(quote_lookup(&t, "IBM", 3), 12345);
  CU_ASSERT_EQUAL(quote_lookup(&t, "HP", 2), 700);
  CU_ASSERT_EQUAL(quote_lookup(&t, "BRK.A", 5), 50000050);
  CU_ASSERT_EQUAL(quote_lookup(&t, "X-Y", 3), 1);
  CU_ASSERT_EQUAL(quote_lookup(&t, "IB", 2), -1);   /* a prefix */
  CU_ASSERT_EQUAL(quote_lookup(&t, "IBMX", 4), -1); /* longer */
  CU_ASSERT_EQUAL(quote_lookup(&t, "", 0), -1);
  quote_table_free(&t);
  CU_ASSERT_PTR_NULL(t.entries);
}

/* Every broken file is refused with a message naming the file, and leaves
 * an empty table behind. */
static void test_load_errors(void) {
  static const char *const broken[] = {
      "",                                      /* no quotes */
      "# only a comment\n",                    /* no quotes */
      "IBM\n",                                 /* no price */
      "IBM 1 2\n",                             /* one field too many */
      "ibm 1\n",                               /* lower case */
      "IBM 1.234\n",                           /* three decimals */
      "IBM -1\n",                              /* negative */
      "IBM 1.\n",                              /* no decimals after the point */
      "IBM 99999999999\n",                     /* too large */
      "IBM 1\nIBM 2\n",                        /* twice */
      "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG 1\n", /* 33 characters */
  };
  for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
    struct quote_table t;
    char err[200] = "";
    CU_ASSERT_EQUAL(load(&t, broken[i], err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, TABLE_FILE));
    CU_ASSERT_PTR_NULL(t.entries);
    CU_ASSERT_EQUAL(t.count, 0);
  }
  struct quote_table t;
  char err[200] = "";
  CU_ASSERT_EQUAL(quote_table_load(&t, "no/such/file.txt", err, sizeof err),
                  -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "no/such/file.txt"));
}

static unsigned status_of(const unsigned char *reply) {
  return (unsigned)reply[0] << 24 | (unsigned)reply[1] << 16 |
         (unsigned)reply[2] << 8 | reply[3];
}

static long value_of(const unsigned char *reply) {
  unsigned long v = (unsigned long)reply[4] << 24 |
                    (unsigned long)reply[5] << 16 |
                    (unsigned long)reply[6] << 8 | reply[7];
  return v >= 0x80000000ul ? (long)v - 0x100000000l : (long)v;
}

static void test_answers(void) {
  struct quote_table t;
  char err[200];
  unsigned char req[QUOTE_REQUEST_SIZE], reply[QUOTE_REPLY_SIZE];
  CU_ASSERT_EQUAL_FATAL(load(&t, good, err, sizeof err), 0);

  quote_request_make(req, "IBM", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_OK);
  CU_ASSERT_EQUAL(status_of(reply), QUOTE_OK);
  CU_ASSERT_EQUAL(value_of(reply), 12345);

  quote_request_make(req, "NOPE", 4);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_UNKNOWN);
  CU_ASSERT_EQUAL(value_of(reply), -1);

  /* Malformed: length 0, beyond the field, a byte outside the alphabet,
   * a zero inside the symbol, padding that is not zero. */
  quote_request_raw(req, 0, "", 0);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  CU_ASSERT_EQUAL(value_of(reply), -1);
  quote_request_raw(req, 33, "IBM", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  quote_request_raw(req, 0xFFFFFFFFu, "IBM", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  quote_request_raw(req, 3, "ibm", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  quote_request_raw(req, 3, "I\0M", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  quote_request_raw(req, 2, "HPX", 3);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_MALFORMED);
  /* The longest symbol is well-formed. */
  quote_request_make(req, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF", 32);
  CU_ASSERT_EQUAL(quote_answer(&t, req, reply), QUOTE_UNKNOWN);
  quote_table_free(&t);
}

/* Several requests at once and a partial one: each whole request is
 * answered in order; the part is left for the next read. */
static void test_answer_all(void) {
  struct quote_table t;
  char err[200];
  unsigned char in[3 * QUOTE_REQUEST_SIZE + 10];
  unsigned char out[3 * QUOTE_REPLY_SIZE];
  CU_ASSERT_EQUAL_FATAL(load(&t, good, err, sizeof err), 0);
  quote_request_make(in, "HP", 2);
  quote_request_raw(in + QUOTE_REQUEST_SIZE, 99, "HP", 2);
  quote_request_make(in + 2 * QUOTE_REQUEST_SIZE, "X-Y", 3);
  unsigned char whole[QUOTE_REQUEST_SIZE];
  quote_request_make(whole, "IBM", 3); /* its first 10 bytes only: cut */
  memcpy(in + 3 * QUOTE_REQUEST_SIZE, whole, 10);
  CU_ASSERT_EQUAL(quote_answer_all(&t, in, sizeof in, out), 3);
  CU_ASSERT_EQUAL(value_of(out), 700);
  CU_ASSERT_EQUAL(status_of(out + QUOTE_REPLY_SIZE), QUOTE_MALFORMED);
  CU_ASSERT_EQUAL(value_of(out + 2 * QUOTE_REPLY_SIZE), 1);
  CU_ASSERT_EQUAL(quote_answer_all(&t, in, QUOTE_REQUEST_SIZE - 1, out), 0);
  CU_ASSERT_EQUAL(quote_answer_all(&t, in, 0, out), 0);
  quote_table_free(&t);
}

static CU_TestInfo quote_tests[] = {
    {"table: load and look up", test_load_and_lookup},
    {"table: broken files refused", test_load_errors},
    {"answers: found, unknown, malformed", test_answers},
    {"answers: batched and partial requests", test_answer_all},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t quote_suite = {"quote: codec and table",
                                              quote_tests, 30, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&quote_suite};
  return taxi_test_run("quote example", suites, 1, argc, argv);
}
