/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/counters.c - what taxi_proactor_stats() counts, checked
 * against what a run of reads and writes did: every handler counted once,
 * and on io_uring the ring's own counters (io_uring_enter calls, SQEs,
 * CQEs) consistent with the operations; 0 on the other backends.
 */
#include "suites.h"

#include <string.h>

static void test_counters(void) {
  enum { ROUNDS = 200 };
  taxi_proactor_t *p = pt_proactor();
  taxi_proactor_stats_t before, after;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &before), 0);
  CU_ASSERT_EQUAL(taxi_proactor_stats(NULL, &before), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, NULL), TAXI_EINVAL);
  int sv[2];
  pt_pair(p, sv);
  char buf[8], out = 'x';
  taxi_op_t rop = TAXI_OP_INIT, wop = TAXI_OP_INIT;
  for (int i = 0; i < ROUNDS; i++) {
    pt_done_t rd, wd;
    pt_done_init(&rd);
    pt_done_init(&wd);
    taxi_buf_t b = {&out, 1};
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &rop, sv[0], buf, 1, 0, pt_on_done, &rd), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_write(p, &wop, sv[0], &b, 1, pt_on_done, &wd), 0);
    CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], "y", 1), 0);
    CU_ASSERT_FATAL(pt_run_done(p, &rd, 1));
    CU_ASSERT_FATAL(pt_run_done(p, &wd, 1));
    CU_ASSERT_EQUAL(rd.status, 0);
    CU_ASSERT_EQUAL(wd.status, 0);
    char echoed;
    size_t got = 0;
    CU_ASSERT_EQUAL(pt_peer_read(sv[1], &echoed, 1, &got), 0);
  }
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &after), 0);
  uint64_t ops = 2 * ROUNDS;
  CU_ASSERT_EQUAL(after.started - before.started, ops);
  CU_ASSERT_EQUAL(after.completed - before.completed, ops);
  CU_ASSERT(after.submissions - before.submissions >= ops);
  CU_ASSERT(after.waits <= after.syscalls);
  if (pt_backend_is("uring")) {
    uint64_t enters = after.ring_enters - before.ring_enters;
    uint64_t sqes = after.sqes - before.sqes;
    uint64_t cqes = after.cqes - before.cqes;
    printf("(%llu operations: %llu io_uring_enter, %llu SQEs, %llu CQEs) ",
           (unsigned long long)ops, (unsigned long long)enters,
           (unsigned long long)sqes, (unsigned long long)cqes);
    CU_ASSERT(enters >= 1);
    CU_ASSERT(after.ring_enters <= after.syscalls);
    /* Each submission is one SQE at least; each operation ends in a CQE
     * (wake-ups and cancellations add their own). */
    CU_ASSERT(sqes >= after.submissions - before.submissions);
    CU_ASSERT(cqes >= ops);
  } else {
    CU_ASSERT_EQUAL(after.ring_enters, 0);
    CU_ASSERT_EQUAL(after.sqes, 0);
    CU_ASSERT_EQUAL(after.cqes, 0);
  }
  pt_close(&sv[1]);
  pt_destroy(p);
}

static CU_TestInfo counter_tests[] = {
    {"counters match the operations", test_counters},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_counters = {"counters", counter_tests, 60,
                                             NULL};
