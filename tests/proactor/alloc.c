/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/alloc.c - no allocation per operation in steady state,
 * nothing left allocated after destroy, and allocation failures reported
 * as TAXI_ENOMEM without leaks.
 *
 * Each test installs the counting allocator (tests/util) before creating
 * its proactor and restores the default after destroying it; the suite
 * runs in a process of its own, so no other taxi object exists then.
 * Steady state means: after a warm-up with the same pattern (so that
 * tables and heaps have grown to size), the malloc and realloc counters do
 * not move while N more operations run.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int al_rounds(void) { return pt_small() ? 300 : 2000; }

static taxi_proactor_t *al_begin(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  util_alloc_reset();
  taxi_proactor_t *p = pt_proactor();
  /* The hook is used (a proactor cannot be made without memory). */
  CU_ASSERT(util_alloc_counts().mallocs + util_alloc_counts().reallocs > 0);
  /* A wait that finds nothing ready, as the counted rounds may: over aio
   * the first one dispatches the backend's internal reactor, which makes
   * its buffer then, once.  A warm-up whose completions were all ready
   * before the proactor looked would leave that to the counted rounds. */
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);
  return p;
}

/* Destroy, check that everything was given back, restore the allocator. */
static void al_end(taxi_proactor_t *p) {
  pt_destroy(p);
  util_alloc_counts_t c = util_alloc_counts();
  if (c.live != 0)
    printf("\n    %lld blocks still allocated after destroy\n",
           (long long)c.live);
  CU_ASSERT_EQUAL(c.live, 0);
  util_alloc_uninstall();
}

static void al_report(const char *what, util_alloc_counts_t a,
                      util_alloc_counts_t b, int n) {
  if (a.mallocs != b.mallocs || a.reallocs != b.reallocs)
    printf("\n    %s: %llu mallocs, %llu reallocs over %d operations\n", what,
           (unsigned long long)(b.mallocs - a.mallocs),
           (unsigned long long)(b.reallocs - a.reallocs), n);
  CU_ASSERT_EQUAL(b.mallocs, a.mallocs);
  CU_ASSERT_EQUAL(b.reallocs, a.reallocs);
}

/* One echo round trip: the peer writes 64 bytes, a read-some gets them, a
 * write sends them back, the peer reads them.  0, or -1. */
static int al_round_trip(taxi_proactor_t *p, int sv[2], taxi_op_t *op,
                         unsigned char *buf, int i) {
  unsigned char msg[64], back[64];
  memset(msg, i & 0xff, sizeof msg);
  if (pt_peer_write(sv[1], msg, sizeof msg) != 0) return -1;
  size_t have = 0;
  while (have < sizeof msg) {
    pt_done_t d;
    pt_done_init(&d);
    if (taxi_proactor_read(p, op, sv[0], buf + have, 4096 - have, 0, pt_on_done,
                           &d) != 0 ||
        !pt_run_done(p, &d, 1) || d.status != 0)
      return -1;
    have += d.bytes;
  }
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {buf, have};
  if (taxi_proactor_write(p, op, sv[0], &b, 1, pt_on_done, &d) != 0 ||
      !pt_run_done(p, &d, 1) || d.status != 0 || d.bytes != have)
    return -1;
  if (pt_peer_read(sv[1], back, sizeof back, NULL) != 0) return -1;
  return memcmp(back, msg, sizeof msg) == 0 ? 0 : -1;
}

static void al_echo(int tcp) {
  taxi_proactor_t *p = al_begin();
  int sv[2];
  if (tcp)
    pt_tcp_pair(p, sv);
  else
    pt_pair(p, sv);
  static unsigned char buf[4096];
  taxi_op_t op;
  taxi_op_init(&op);
  int bad = 0;
  for (int i = 0; i < 200 && !bad; i++) bad = al_round_trip(p, sv, &op, buf, i);
  util_alloc_counts_t a = util_alloc_counts();
  int n = al_rounds();
  for (int i = 0; i < n && !bad; i++) bad = al_round_trip(p, sv, &op, buf, i);
  util_alloc_counts_t b = util_alloc_counts();
  CU_ASSERT_EQUAL(bad, 0);
  al_report("echo round trips", a, b, n);
  pt_close(&sv[1]);
  al_end(p);
}

static void test_echo_no_alloc(void) { al_echo(0); }
static void test_echo_tcp_no_alloc(void) { al_echo(1); }

/* Rounds of 64 timers at once (0 or 1 ms), and posts. */
static void test_timers_posts_no_alloc(void) {
  taxi_proactor_t *p = al_begin();
  enum { N = 64 };
  static taxi_op_t ops[N], posts[N];
  static pt_done_t d[N], dp[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    taxi_op_init(&posts[i]);
  }
  int bad = 0;
  util_alloc_counts_t a = util_alloc_counts();
  int rounds = al_rounds() / 20;
  for (int r = 0; r < 10 + rounds && !bad; r++) {
    if (r == 10) a = util_alloc_counts(); /* after the warm-up */
    for (int i = 0; i < N; i++) {
      pt_done_init(&d[i]);
      pt_done_init(&dp[i]);
      if (taxi_proactor_timer(p, &ops[i], (i % 2) * TAXI_NSEC_PER_MSEC,
                              pt_on_done, &d[i]) != 0 ||
          taxi_proactor_post(p, &posts[i], pt_on_done, &dp[i]) != 0)
        bad = 1;
    }
    for (int i = 0; i < N && !bad; i++)
      if (!pt_run_done(p, &d[i], 1) || !pt_run_done(p, &dp[i], 1)) bad = 1;
  }
  util_alloc_counts_t b = util_alloc_counts();
  CU_ASSERT_EQUAL(bad, 0);
  al_report("timers and posts", a, b, rounds * N * 2);
  al_end(p);
}

/* File reads and writes at offsets. */
static void test_file_ops_no_alloc(void) {
  taxi_proactor_t *p = al_begin();
  enum { SIZE = 65536, CHUNK = 4096 };
  int fd = pt_temp_file(SIZE, 80, NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, fd), 0);
  static unsigned char buf[CHUNK];
  taxi_op_t op;
  taxi_op_init(&op);
  int bad = 0;
  util_alloc_counts_t a = util_alloc_counts();
  int n = al_rounds();
  for (int i = 0; i < 100 + n && !bad; i++) {
    if (i == 100) a = util_alloc_counts();
    int64_t off = (int64_t)(i % (SIZE / CHUNK)) * CHUNK;
    pt_done_t d;
    pt_done_init(&d);
    int rc = i % 4 == 3 ? taxi_proactor_write_file(p, &op, fd, buf, CHUNK, off,
                                                   pt_on_done, &d)
                        : taxi_proactor_read_file(p, &op, fd, buf, CHUNK, off,
                                                  pt_on_done, &d);
    if (rc != 0 || !pt_run_done(p, &d, 1) || d.status != 0 || d.bytes != CHUNK)
      bad = 1;
  }
  util_alloc_counts_t b = util_alloc_counts();
  CU_ASSERT_EQUAL(bad, 0);
  al_report("file reads and writes", a, b, n);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, fd), 0);
  al_end(p);
}

/* Transmit-file with header and trailer, and read + cancel. */
static void test_transmit_cancel_no_alloc(void) {
  taxi_proactor_t *p = al_begin();
  enum { SIZE = 16384 };
  int fd = pt_temp_file(SIZE, 81, NULL);
  int sv[2];
  pt_pair(p, sv);
  char hdr[16] = "header", trl[16] = "trailer";
  taxi_buf_t hb = {hdr, sizeof hdr}, tb = {trl, sizeof trl};
  static unsigned char sink[SIZE + 32];
  taxi_op_t op;
  taxi_op_init(&op);
  int bad = 0;
  util_alloc_counts_t a = util_alloc_counts();
  int n = al_rounds() / 4;
  for (int i = 0; i < 20 + n && !bad; i++) {
    if (i == 20) a = util_alloc_counts();
    pt_done_t d;
    pt_done_init(&d);
    if (taxi_proactor_transmit_file(p, &op, sv[0], fd, 0, 0, &hb, &tb,
                                    pt_on_done, &d) != 0)
      bad = 1;
    /* The peer reads while this thread dispatches. */
    size_t have = 0;
    taxi_time_t start = taxi_now();
    while (!bad && have < sizeof sink &&
           util_elapsed_ms(start) < pt_wait_ms()) {
      ssize_t r = read(sv[1], sink + have, sizeof sink - have);
      if (r > 0)
        have += (size_t)r;
      else if (taxi_proactor_handle_events(p, 1) < 0)
        bad = 1;
    }
    if (bad || have != sizeof sink || !pt_run_done(p, &d, 1) || d.status != 0)
      bad = 1;
    /* A read, cancelled. */
    pt_done_init(&d);
    if (taxi_proactor_read(p, &op, sv[0], sink, 16, 0, pt_on_done, &d) != 0 ||
        taxi_proactor_cancel(p, &op) != 0 || !pt_run_done(p, &d, 1) ||
        d.status != TAXI_ECANCELED)
      bad = 1;
  }
  util_alloc_counts_t b = util_alloc_counts();
  CU_ASSERT_EQUAL(bad, 0);
  al_report("transmit-file and cancel", a, b, n * 2);
  close(fd);
  pt_close(&sv[1]);
  al_end(p);
}

/* Posts through the L/F pool. */
typedef struct al_pool {
  atomic_int done;
} al_pool_t;

static void al_on_post(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)status;
  (void)bytes;
  atomic_fetch_add(&((al_pool_t *)act)->done, 1);
}

static void test_pool_no_alloc(void) {
  if (pt_skip_one_thread()) return;
  taxi_proactor_t *p = al_begin();
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(pool, 2), 0);
  enum { N = 32 };
  static taxi_op_t ops[N];
  static al_pool_t x;
  atomic_store(&x.done, 0);
  for (int i = 0; i < N; i++) taxi_op_init(&ops[i]);
  int bad = 0, goal = 0;
  util_alloc_counts_t a = util_alloc_counts();
  int rounds = al_rounds() / 10;
  for (int r = 0; r < 20 + rounds && !bad; r++) {
    if (r == 20) a = util_alloc_counts();
    for (int i = 0; i < N; i++)
      if (taxi_proactor_post(p, &ops[i], al_on_post, &x) != 0) bad = 1;
    goal += N;
    if (!util_wait_flag(&x.done, goal, pt_wait_ms())) bad = 1;
    /* The handler has counted; wait until the records are idle too. */
    for (int i = 0; i < N; i++) {
      taxi_time_t start = taxi_now();
      while (taxi_op_in_flight(&ops[i]) && util_elapsed_ms(start) < 1000)
        pt_sleep_ms(1);
    }
  }
  util_alloc_counts_t b = util_alloc_counts();
  CU_ASSERT_EQUAL(bad, 0);
  al_report("posts through the pool", a, b, rounds * N);
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  al_end(p);
}

/* Every allocation failure while creating a proactor is TAXI_ENOMEM and
 * leaves nothing allocated; so is one while attaching a handle (which then
 * is not attached). */
static void test_enomem(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  int created = 0;
  for (long n = 0; n < 200 && !created; n++) {
    util_alloc_reset();
    util_alloc_fail_after(n);
    taxi_proactor_t *p = NULL;
    int rc = util_proactor_create(&p, pt_backend);
    util_alloc_fail_after(-1);
    if (rc == 0) {
      created = 1;
      CU_ASSERT_EQUAL(taxi_proactor_destroy(p), 0);
    } else if (rc != TAXI_ENOMEM) {
      printf("\n    allocation %ld failing: create = %d (%s)\n", n, rc,
             taxi_error_name(rc));
      CU_ASSERT_EQUAL(rc, TAXI_ENOMEM);
    }
    util_alloc_counts_t c = util_alloc_counts();
    if (c.live != 0) {
      printf("\n    allocation %ld failing: %lld blocks left\n", n,
             (long long)c.live);
      CU_ASSERT_EQUAL(c.live, 0);
      break;
    }
  }
  CU_ASSERT(created);

  util_alloc_reset();
  taxi_proactor_t *p = pt_proactor();
  int attached = 0, refused = 0;
  for (int i = 0; i < 64; i++) {
    int sv[2];
    if (util_socketpair(sv) != 0) break;
    util_alloc_fail_after(0);
    int rc = taxi_proactor_attach(p, sv[0]);
    util_alloc_fail_after(-1);
    CU_ASSERT(rc == 0 || rc == TAXI_ENOMEM);
    if (rc == 0) {
      attached++;
      CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
    } else {
      refused++;
      /* Not attached: operations on it are refused, attaching works now. */
      taxi_op_t op;
      taxi_op_init(&op);
      pt_done_t d;
      pt_done_init(&d);
      char c;
      CU_ASSERT_EQUAL(
          taxi_proactor_read(p, &op, sv[0], &c, 1, 0, pt_on_done, &d),
          TAXI_ENOENT);
      CU_ASSERT_EQUAL(taxi_proactor_attach(p, sv[0]), 0);
      CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
    }
    close(sv[1]);
  }
  printf("\n    attach with allocations failing: %d attached, %d refused\n",
         attached, refused);
  al_end(p);
}

static CU_TestInfo alloc_tests[] = {
    {"echo round trips (unix) allocate nothing", test_echo_no_alloc},
    {"echo round trips (tcp) allocate nothing", test_echo_tcp_no_alloc},
    {"timers and posts allocate nothing", test_timers_posts_no_alloc},
    {"file reads and writes allocate nothing", test_file_ops_no_alloc},
    {"transmit-file and cancel allocate nothing",
     test_transmit_cancel_no_alloc},
    {"posts through the L/F pool allocate nothing", test_pool_no_alloc},
    {"allocation failures: TAXI_ENOMEM, no leak", test_enomem},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_alloc = {"alloc", alloc_tests, 120, NULL};
