/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_alloc.c - the Leader/Followers pool's allocations:
 * none per event, all freed by destroy, failures reported without leaks.
 */
#define _GNU_SOURCE 1

#include "lf_helpers.h"

/* ---- allocations --------------------------------------------------------- */

/* Echo what arrives. */
static int lf_echo_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  lf_conn_t *c = LF_CONN(h);
  char buf[64];
  (void)ev;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    atomic_fetch_add(&c->bytes, (long)n);
    if (write(fd, buf, (size_t)n) != n) atomic_fetch_add(&c->overlaps, 1);
  }
  atomic_fetch_add(&c->inputs, 1);
  return 0;
}

static const taxi_handler_ops_t lf_echo_ops = {.input = lf_echo_input,
                                               .close = lf_conn_close};

/* One byte to each of the first n connections' peers, then wait for every
 * answer.  0 or -1. */
static int lf_ping_all(lf_test_t *t, int n) {
  int peers[LF_MAX_CONNS];
  for (int i = 0; i < n; i++) peers[i] = t->conn[i].sv[1];
  return pools_ping_all(peers, n);
}

/* Zero heap allocations per event in steady state: 4 threads, 32
 * connections, 50,000 ping-pong events after a warm-up. */
static void test_zero_alloc_per_event(void) {
  enum { N = 32, WARMUP = 100 };
  const int events = 50000;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  CU_ASSERT(util_alloc_counts().mallocs > 0); /* the hook is used */
  lf_conns(t, N, &lf_echo_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  int failed = 0;
  for (int i = 0; i < WARMUP && !failed; i++)
    if (lf_ping_all(t, N) != 0) failed = 1;
  CU_ASSERT_EQUAL(failed, 0);
  taxi_lf_stats_t s0 = lf_stats(t->p);
  util_alloc_counts_t before = util_alloc_counts();
  int rounds = (events + N - 1) / N;
  for (int i = 0; i < rounds && !failed; i++)
    if (lf_ping_all(t, N) != 0) failed = 2;
  util_alloc_counts_t after = util_alloc_counts();
  taxi_lf_stats_t s1 = lf_stats(t->p);
  CU_ASSERT_EQUAL(failed, 0);
  uint64_t mallocs = after.mallocs - before.mallocs;
  uint64_t reallocs = after.reallocs - before.reallocs;
  printf("(%d round trips, %llu events, %llu malloc, %llu realloc) ",
         rounds * N, (unsigned long long)(s1.events - s0.events),
         (unsigned long long)mallocs, (unsigned long long)reallocs);
  /* A hook may take the next round's byte with this one's: count the
   * round trips, not the events. */
  CU_ASSERT(s1.events - s0.events > 0);
  CU_ASSERT(rounds * N >= events);
  CU_ASSERT_EQUAL(mallocs, 0);
  CU_ASSERT_EQUAL(reallocs, 0);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Everything a pool allocated is freed by destroy (through the hook): pool
 * lifetimes on one reactor leave nothing behind, and destroying the
 * reactor then frees everything.  (The reactor may keep buffers it grew
 * for the first pool, for the next: the baseline is taken after one.) */
static void test_destroy_frees_everything(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  lf_conns(t, 8, &lf_count_ops);
  int64_t live[3];
  for (int cycle = 0; cycle < 3; cycle++) {
    int64_t before = util_alloc_counts().live;
    lf_create(t, TAXI_PROMOTE_PRIORITY, TAXI_LEADERS_ONE);
    CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
    int j = lf_start_joiner(t, LF_JOIN_MS, 4);
    for (int i = 0; i < 8; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(lf_wait_bytes(t, 8L * (cycle + 1)));
    CU_ASSERT(util_alloc_counts().live > before);
    CU_ASSERT_EQUAL(
        util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
    t->p = NULL;
    util_thread_join(&t->th[j], POOLS_WAIT_MS, "taxi_lf_join after destroy");
    live[cycle] = util_alloc_counts().live;
  }
  if (live[1] != live[0] || live[2] != live[0])
    printf(
        "\n    blocks allocated after each pool's destroy: %lld %lld "
        "%lld\n",
        (long long)live[0], (long long)live[1], (long long)live[2]);
  CU_ASSERT_EQUAL(live[1], live[0]);
  CU_ASSERT_EQUAL(live[2], live[0]);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Each allocation create and spawn make, failed in turn: TAXI_ENOMEM,
 * nothing leaked, the reactor left usable. */
static void test_allocation_failures(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  lf_test_t *t = lf_new();
  /* One pool first, so that what the reactor grows for a pool is there. */
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_destroy, t->p, POOLS_WAIT_MS, "taxi_lf_destroy"), 0);
  t->p = NULL;
  int64_t base = util_alloc_counts().live_here;
  int succeeded = 0, wrong = 0, leaked = 0;
  /* Only this thread's allocations are failed and counted: a pool's own
   * threads may grow the backend's buffers meanwhile (a snapshot array
   * the first wait over a bigger set allocates), and a failure there is
   * a retried wait, not what this test counts.  What those threads
   * allocate is checked once the reactor is gone, below. */
  for (long n = 0; n < 200 && !succeeded; n++) {
    util_alloc_fail_after_here(n);
    taxi_lf_pool_t *p = NULL;
    int created = taxi_lf_create(&p, t->r, NULL);
    int rc = created;
    if (rc == 0) rc = taxi_lf_spawn(p, 2);
    util_alloc_fail_after_here(-1);
    if (rc == 0) succeeded = 1;
    if (rc != 0 && rc != TAXI_ENOMEM) {
      if (!wrong)
        printf("\n    failing allocation #%ld: %s\n", n, taxi_error_name(rc));
      wrong++;
    }
    if (created == 0) CU_ASSERT_EQUAL(taxi_lf_destroy(p), 0);
    if (util_alloc_counts().live_here != base) {
      if (!leaked)
        printf("\n    failing allocation #%ld: %lld blocks leaked\n", n,
               (long long)(util_alloc_counts().live_here - base));
      leaked++;
    }
  }
  CU_ASSERT_EQUAL(succeeded, 1);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(leaked, 0);
  lf_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

static CU_TestInfo lf_alloc_tests[] = {
    {"destroy frees everything", test_destroy_frees_everything},
    {"allocation failures: TAXI_ENOMEM, no leak", test_allocation_failures},
    {"zero allocations per event", test_zero_alloc_per_event},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_lf_alloc = {"lf alloc", lf_alloc_tests, 120,
                                                NULL};
