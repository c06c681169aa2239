/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_alloc.c - the allocations of each pool of the table:
 * none per event, all freed by destroy, failures reported without leaks
 * (the suites "lf alloc" and "hsha alloc"); HS/HA's threads allocate
 * nothing of their own.
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

/* Echo what arrives. */
static int pool_echo_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
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

static const taxi_handler_ops_t pool_echo_ops = {.input = pool_echo_input,
                                                 .close = pool_conn_close};

/* One byte to each of the first n connections' peers, then wait for every
 * answer.  0 or -1. */
static int pool_ping_all(pool_test_t *t, int n) {
  int peers[POOL_MAX_CONNS];
  for (int i = 0; i < n; i++) peers[i] = t->conn[i].sv[1];
  return pools_ping_all(peers, n);
}

/* Zero heap allocations per event in steady state: 4 threads, 32
 * connections, 50,000 ping-pong events after a warm-up. */
static void zero_alloc_per_event(const pool_row_t *row) {
  enum { N = 32, WARMUP = 100 };
  const int events = 50000;
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  pool_test_t *t = pool_new(row);
  CU_ASSERT(util_alloc_counts().mallocs > 0); /* the hook is used */
  pool_conns(t, N, &pool_echo_ops);
  pool_start(t, NULL, 4);
  int failed = 0;
  for (int i = 0; i < WARMUP && !failed; i++)
    if (pool_ping_all(t, N) != 0) failed = 1;
  CU_ASSERT_EQUAL(failed, 0);
  pool_counts_t s0 = pool_counts(t);
  util_alloc_counts_t before = util_alloc_counts();
  int rounds = (events + N - 1) / N;
  for (int i = 0; i < rounds && !failed; i++)
    if (pool_ping_all(t, N) != 0) failed = 2;
  util_alloc_counts_t after = util_alloc_counts();
  pool_counts_t s1 = pool_counts(t);
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
  pool_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Everything a pool allocated is freed by destroy (through the hook): pool
 * lifetimes on one reactor leave nothing behind, and destroying the
 * reactor then frees everything.  (The reactor may keep buffers it grew
 * for the first pool, for the next: the baseline is taken after one.)
 * Each pool runs with its optional parts in use: LF with priority
 * promotion and an application thread, HS/HA with a priority callback. */
static void destroy_frees_everything(const pool_row_t *row) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  pool_test_t *t = pool_new(row);
  pool_conns(t, 8, &pool_count_ops);
  const void *opts = row->priority_options(t);
  int64_t live[3];
  for (int cycle = 0; cycle < 3; cycle++) {
    int64_t before = util_alloc_counts().live;
    pool_start(t, opts, 3);
    if (row->add_app_thread) row->add_app_thread(t, LF_JOIN_MS, 4);
    for (int i = 0; i < 8; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_bytes(t, 8L * (cycle + 1)));
    CU_ASSERT(util_alloc_counts().live > before);
    CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
    pool_join_app_threads(t, "taxi_lf_join after destroy");
    live[cycle] = util_alloc_counts().live;
  }
  if (live[1] != live[0] || live[2] != live[0])
    printf(
        "\n    blocks allocated after each pool's destroy: %lld %lld "
        "%lld\n",
        (long long)live[0], (long long)live[1], (long long)live[2]);
  CU_ASSERT_EQUAL(live[1], live[0]);
  CU_ASSERT_EQUAL(live[2], live[0]);
  pool_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Each allocation create (and LF's spawn) make, failed in turn:
 * TAXI_ENOMEM, nothing leaked, the reactor left usable. */
static void allocation_failures(const pool_row_t *row) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  pool_test_t *t = pool_new(row);
  /* One pool first, so that what the reactor grows for a pool is there. */
  pool_start(t, NULL, 2);
  CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
  int64_t base = util_alloc_counts().live_here;
  int succeeded = 0, wrong = 0, leaked = 0;
  /* Only this thread's allocations are failed and counted: a pool's own
   * threads may grow the backend's buffers meanwhile (a snapshot array
   * the first wait over a bigger set allocates), and a failure there is
   * a retried wait, not what this test counts.  What those threads
   * allocate is checked once the reactor is gone, below. */
  for (long n = 0; n < 200 && !succeeded; n++) {
    util_alloc_fail_after_here(n);
    void *p = NULL;
    int rc = row->create(t->r, NULL, 2, &p);
    util_alloc_fail_after_here(-1);
    if (rc == 0) {
      succeeded = 1;
      CU_ASSERT_EQUAL(row->destroy(p), 0);
    } else if (rc != TAXI_ENOMEM) {
      if (!wrong)
        printf("\n    failing allocation #%ld: %s\n", n, taxi_error_name(rc));
      wrong++;
    }
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
  /* The reactor was left free. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(t->r, 0), 0);
  pool_free(t);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Allocations counted by the thread that makes them: the test's own, and
 * every other thread's (here, the pool's). */
static _Thread_local int alloc_on_test_thread;
static atomic_long allocs_elsewhere;

static void *tag_malloc(size_t n) {
  if (!alloc_on_test_thread) atomic_fetch_add(&allocs_elsewhere, 1);
  return malloc(n);
}

static void *tag_realloc(void *p, size_t n) {
  if (!alloc_on_test_thread) atomic_fetch_add(&allocs_elsewhere, 1);
  return realloc(p, n);
}

static void tag_free(void *p) { free(p); }

/* Every block of an HS/HA pool is made by taxi_hsha_create, on the
 * calling thread: its workers allocate nothing as they start, which the
 * OS may schedule long after create returned, in the middle of an
 * application's first requests.  The count is exact whatever the timing:
 * destroy joins every worker, and a worker's start runs before it takes
 * any event.  A first pool leaves the reactor's backend grown for the set
 * (its buffers are the reactor's, grown by whichever thread waits). */
static void hsha_threads_allocate_nothing(void) {
  enum { N = 8, WORKERS = 4 };
  CU_ASSERT_EQUAL_FATAL(util_set_allocator(tag_malloc, tag_realloc, tag_free),
                        0);
  alloc_on_test_thread = 1;
  pool_test_t *t = pool_new(&pool_row_hsha);
  pool_conns(t, N, &pool_count_ops);
  long elsewhere[2];
  for (int cycle = 0; cycle < 2; cycle++) {
    atomic_store(&allocs_elsewhere, 0);
    pool_start(t, NULL, WORKERS);
    for (int i = 0; i < N; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_bytes(t, (long)N * (cycle + 1)));
    CU_ASSERT_EQUAL(pool_destroy_bounded(t), 0);
    elsewhere[cycle] = atomic_load(&allocs_elsewhere);
  }
  if (elsewhere[1] != 0)
    printf("(%ld allocations by the pool's threads) ", elsewhere[1]);
  CU_ASSERT_EQUAL(elsewhere[1], 0);
  pool_free(t);
  alloc_on_test_thread = 0;
  CU_ASSERT_EQUAL(util_set_allocator(NULL, NULL, NULL), 0);
}

POOL_CASE(lf, zero_alloc_per_event)
POOL_CASE(lf, destroy_frees_everything)
POOL_CASE(lf, allocation_failures)
POOL_CASE(hsha, zero_alloc_per_event)
POOL_CASE(hsha, destroy_frees_everything)
POOL_CASE(hsha, allocation_failures)

#define POOL_ALLOC_TESTS(row)                                       \
  {                                                                 \
    {"destroy frees everything", row##_destroy_frees_everything},   \
        {"allocation failures: TAXI_ENOMEM, no leak",               \
         row##_allocation_failures},                                \
        {"zero allocations per event", row##_zero_alloc_per_event}, \
        CU_TEST_INFO_NULL,                                          \
  }

static CU_TestInfo lf_alloc_tests[] = POOL_ALLOC_TESTS(lf);
static CU_TestInfo hs_alloc_tests[] = {
    {"destroy frees everything", hsha_destroy_frees_everything},
    {"allocation failures: TAXI_ENOMEM, no leak", hsha_allocation_failures},
    {"zero allocations per event", hsha_zero_alloc_per_event},
    {"its threads allocate nothing: all made by create",
     hsha_threads_allocate_nothing},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pools_suite_lf_alloc = {"lf alloc", lf_alloc_tests, 120,
                                                NULL};
const taxi_test_suite_t pools_suite_hsha_alloc = {"hsha alloc", hs_alloc_tests,
                                                  120, NULL};
