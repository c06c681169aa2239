/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/scale.c - a thousand operations outstanding at once.
 *
 * 500 socket pairs with a read pending on each, 300 timers and 200 file
 * reads (over 20 files) are all in flight together; then every one
 * completes exactly once with its own result.  Also 1,000 reads closed
 * away at once, and 1,000 reads queued on one socket.
 *
 * The emulated proactor over select can watch descriptors below
 * FD_SETSIZE only: the attached ends must be numbered below it, so the
 * peer ends are moved above it when the descriptor limit allows; if not,
 * the pairs are fewer and timers make up the thousand (the test prints
 * so).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SC_OPS = 1000, SC_PAIRS = 500, SC_FILES = 20, SC_FILE_READS = 200 };
enum { SC_CHUNK = 4096 };

typedef struct sc_run {
  taxi_proactor_t *p;
  int pairs, timers, freads;
  int sv[SC_PAIRS][2];
  int files[SC_FILES];
  unsigned char *content[SC_FILES];
  taxi_op_t ops[SC_OPS];
  pt_done_t d[SC_OPS];
  unsigned char rbuf[SC_PAIRS][4];
  unsigned char fbuf[SC_FILE_READS][SC_CHUNK];
  atomic_int total;
} sc_run_t;

static void sc_on_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  sc_run_t *r = act;
  size_t i = (size_t)(op - r->ops);
  if (i < SC_OPS) pt_on_done(op, status, bytes, &r->d[i]);
  atomic_fetch_add(&r->total, 1);
}

/* Move fd above `floor` (when floor > 0); returns the new descriptor, or
 * fd itself when that is not possible. */
static int sc_move_up(int fd, unsigned floor) {
  if (floor == 0) return fd;
  int nfd = fcntl(fd, F_DUPFD_CLOEXEC, (int)floor);
  if (nfd < 0) return fd;
  close(fd);
  return nfd;
}

/* How many pairs fit: all 500 unless the backend has a handle limit that
 * the descriptor limit does not let us keep the peers above. */
static int sc_pairs_that_fit(unsigned *floor) {
  unsigned max = pt_max_handles();
  *floor = 0;
  if (!util_raise_nofile(4096)) util_raise_nofile(max + SC_PAIRS + 256);
  if (max == 0) return SC_PAIRS;
#if defined(_WIN32)
  /* Windows handles are not numbers below a limit: none can be moved
   * above it, so fewer pairs. */
  int movable = 0;
#else
  int movable = util_raise_nofile(max + SC_PAIRS + 256);
#endif
  if (movable) {
    *floor = max;
    printf("\n    %s: handle limit %u: the peer ends are moved above it\n",
           pt_backend, max);
    return SC_PAIRS;
  }
  int fit = ((int)max - 64 - SC_FILES) / 2;
  if (fit > SC_PAIRS) fit = SC_PAIRS;
  printf(
      "\n    %s: handle limit %u and no room above it for the peer ends: "
      "%d socket pairs instead of %d, timers make up the rest\n",
      pt_backend, max, fit, SC_PAIRS);
  return fit;
}

static int sc_all_done(void *arg) {
  sc_run_t *r = arg;
  return atomic_load(&r->total) >= SC_OPS;
}

static void test_thousand_outstanding(void) {
  static sc_run_t r;
  memset(&r, 0, sizeof r);
  unsigned floor = 0;
  r.pairs = sc_pairs_that_fit(&floor);
  r.freads = SC_FILE_READS;
  r.timers = SC_OPS - r.pairs - r.freads;
  r.p = pt_proactor();
  for (int i = 0; i < SC_OPS; i++) {
    taxi_op_init(&r.ops[i]);
    pt_done_init(&r.d[i]);
  }
  int k = 0;
  for (int i = 0; i < r.pairs; i++, k++) {
    if (util_socketpair(r.sv[i]) != 0) {
      printf("\n    socketpair %d: %s\n", i, strerror(errno));
      CU_FAIL_FATAL("socketpair");
    }
    r.sv[i][1] = sc_move_up(r.sv[i][1], floor);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(r.p, r.sv[i][0]), 0);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(r.p, &r.ops[k], r.sv[i][0], r.rbuf[i],
                           sizeof r.rbuf[i], 0, sc_on_done, &r),
        0);
  }
  uint64_t s = 50;
  for (int i = 0; i < r.timers; i++, k++) {
    taxi_time_t delay = (taxi_time_t)(pt_rand(&s) % 20) * TAXI_NSEC_PER_MSEC;
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_timer(r.p, &r.ops[k], delay, sc_on_done, &r), 0);
  }
  size_t fsize = (size_t)(SC_FILE_READS / SC_FILES) * SC_CHUNK;
  for (int f = 0; f < SC_FILES; f++) {
    r.files[f] = pt_temp_file(fsize, 60 + (uint64_t)f, &r.content[f]);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(r.p, r.files[f]), 0);
  }
  for (int i = 0; i < r.freads; i++, k++) {
    int f = i % SC_FILES;
    int64_t off = (int64_t)(i / SC_FILES) * SC_CHUNK;
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read_file(r.p, &r.ops[k], r.files[f], r.fbuf[i], SC_CHUNK,
                                off, sc_on_done, &r),
        0);
  }
  CU_ASSERT_EQUAL_FATAL(k, SC_OPS);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(r.p, &st), 0);
  CU_ASSERT(st.started >= SC_OPS);

  /* Only now the bytes the reads wait for. */
  for (int i = 0; i < r.pairs; i++) {
    unsigned char c = (unsigned char)(i * 7 + 1);
    CU_ASSERT_EQUAL(pt_peer_write(r.sv[i][1], &c, 1), 0);
  }
  CU_ASSERT(pt_run_until(r.p, sc_all_done, &r, pt_wait_ms() * 2) == 1);
  pt_settle(r.p, 30);
  CU_ASSERT_EQUAL(atomic_load(&r.total), SC_OPS);
  int wrong = 0;
  k = 0;
  for (int i = 0; i < r.pairs; i++, k++) {
    if (atomic_load(&r.d[k].calls) != 1 || r.d[k].status != 0 ||
        r.d[k].bytes != 1 || r.rbuf[i][0] != (unsigned char)(i * 7 + 1)) {
      if (wrong++ < 5)
        printf("\n    read %d: calls %d status %d bytes %zu\n", i,
               atomic_load(&r.d[k].calls), r.d[k].status, r.d[k].bytes);
    }
  }
  for (int i = 0; i < r.timers; i++, k++) {
    if (atomic_load(&r.d[k].calls) != 1 || r.d[k].status != 0) {
      if (wrong++ < 5)
        printf("\n    timer %d: calls %d status %d\n", i,
               atomic_load(&r.d[k].calls), r.d[k].status);
    }
  }
  for (int i = 0; i < r.freads; i++, k++) {
    int f = i % SC_FILES;
    size_t off = (size_t)(i / SC_FILES) * SC_CHUNK;
    if (atomic_load(&r.d[k].calls) != 1 || r.d[k].status != 0 ||
        r.d[k].bytes != SC_CHUNK ||
        memcmp(r.fbuf[i], r.content[f] + off, SC_CHUNK) != 0) {
      if (wrong++ < 5)
        printf("\n    file read %d: calls %d status %d bytes %zu\n", i,
               atomic_load(&r.d[k].calls), r.d[k].status, r.d[k].bytes);
    }
  }
  CU_ASSERT_EQUAL(wrong, 0);
  taxi_proactor_stats_t st2;
  CU_ASSERT_EQUAL(taxi_proactor_stats(r.p, &st2), 0);
  CU_ASSERT_EQUAL(st2.completed - st.completed, SC_OPS);
  for (int i = 0; i < r.pairs; i++) pt_close(&r.sv[i][1]);
  for (int f = 0; f < SC_FILES; f++) free(r.content[f]);
  pt_destroy(r.p); /* closes the attached ends and files */
}

/* 1,000 reads (two on each of 500 sockets) ended by closing every socket:
 * each completes once with TAXI_ECANCELED, in issue order per socket. */
static void test_thousand_closed(void) {
  static sc_run_t r;
  memset(&r, 0, sizeof r);
  unsigned floor = 0;
  r.pairs = sc_pairs_that_fit(&floor);
  r.p = pt_proactor();
  int n = 0;
  for (int i = 0; i < r.pairs; i++) {
    if (util_socketpair(r.sv[i]) != 0) CU_FAIL_FATAL("socketpair");
    r.sv[i][1] = sc_move_up(r.sv[i][1], floor);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(r.p, r.sv[i][0]), 0);
    for (int j = 0; j < 2; j++, n++) {
      taxi_op_init(&r.ops[n]);
      pt_done_init(&r.d[n]);
      CU_ASSERT_EQUAL_FATAL(
          taxi_proactor_read(r.p, &r.ops[n], r.sv[i][0], r.rbuf[i] + 2 * j, 2,
                             TAXI_READ_EXACT, sc_on_done, &r),
          0);
    }
  }
  pt_settle(r.p, 20);
  CU_ASSERT_EQUAL(atomic_load(&r.total), 0);
  for (int i = 0; i < r.pairs; i++)
    CU_ASSERT_EQUAL(taxi_proactor_close(r.p, r.sv[i][0]), 0);
  atomic_int *total = &r.total;
  CU_ASSERT(pt_run_count(r.p, total, n));
  pt_settle(r.p, 30);
  CU_ASSERT_EQUAL(atomic_load(&r.total), n);
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    if (atomic_load(&r.d[i].calls) != 1 || r.d[i].status != TAXI_ECANCELED)
      wrong++;
    if (i % 2 == 1 && r.d[i].seq < r.d[i - 1].seq) wrong++;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  for (int i = 0; i < r.pairs; i++) pt_close(&r.sv[i][1]);
  pt_destroy(r.p);
}

/* 1,000 one-byte exact reads queued on one socket: in order, each with
 * its byte. */
static void test_thousand_on_one_socket(void) {
  static sc_run_t r;
  memset(&r, 0, sizeof r);
  r.p = pt_proactor();
  int sv[2];
  pt_pair(r.p, sv);
  static unsigned char got[SC_OPS], msg[SC_OPS];
  pt_fill(msg, sizeof msg, 70);
  memset(got, 0, sizeof got);
  for (int i = 0; i < SC_OPS; i++) {
    taxi_op_init(&r.ops[i]);
    pt_done_init(&r.d[i]);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(r.p, &r.ops[i], sv[0], &got[i], 1,
                                             TAXI_READ_EXACT, sc_on_done, &r),
                          0);
  }
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT(pt_run_count(r.p, &r.total, SC_OPS));
  pt_settle(r.p, 10);
  CU_ASSERT_EQUAL(atomic_load(&r.total), SC_OPS);
  int wrong = 0;
  for (int i = 0; i < SC_OPS; i++) {
    if (atomic_load(&r.d[i].calls) != 1 || r.d[i].status != 0 ||
        got[i] != msg[i] || (i > 0 && r.d[i].seq < r.d[i - 1].seq))
      wrong++;
  }
  CU_ASSERT_EQUAL(wrong, 0);
  pt_close(&sv[1]);
  pt_destroy(r.p);
}

/* A backend with a handle limit (emulated over select) refuses a handle
 * numbered beyond it with TAXI_ETOOMANY - at attach, or when an operation
 * on it has to wait - instead of corrupting its handle set or hanging;
 * the proactor goes on working. */
static void test_handle_beyond_limit(void) {
  unsigned max = pt_max_handles();
  if (max == 0) {
    printf("\n    %s: no handle limit: not applicable\n", pt_backend);
    return;
  }
#if defined(_WIN32)
  /* There the limit counts handles, and handles are not numbered below
   * it; the reactor suite's "beyond the handle limit" fills the set. */
  printf("\n    %s: handles are not numbered: not applicable\n", pt_backend);
  return;
#endif
  if (!util_raise_nofile(max + 64)) {
    printf("\n    %s: cannot raise the descriptor limit above %u: skipped\n",
           pt_backend, max);
    return;
  }
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  int high = fcntl(sv[0], F_DUPFD_CLOEXEC, (int)max + 8);
  CU_ASSERT_FATAL(high >= (int)max);
  int rc = taxi_proactor_attach(p, high);
  if (rc == 0) {
    /* Accepted at attach (the backend watches handles lazily): then an
     * operation that has to wait must end with the error, not hang and
     * not touch the handle set. */
    char hb[4];
    taxi_op_t hop;
    taxi_op_init(&hop);
    pt_done_t hd;
    pt_done_init(&hd);
    rc = taxi_proactor_read(p, &hop, high, hb, sizeof hb, TAXI_READ_EXACT,
                            pt_on_done, &hd);
    if (rc == 0) {
      CU_ASSERT(pt_run_done(p, &hd, 1));
      rc = hd.status;
    }
    printf("\n    attach(%d) accepted; a read on it: %d (%s)\n", high, rc,
           taxi_error_name(rc));
    taxi_proactor_detach(p, high);
  } else {
    printf("\n    attach(%d) = %d (%s)\n", high, rc, taxi_error_name(rc));
  }
  CU_ASSERT_EQUAL(rc, TAXI_ETOOMANY);
  /* Still fine below the limit. */
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, sv[0]), 0);
  char buf[4];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, 4,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  CU_ASSERT_EQUAL(pt_peer_write(sv[1], "abcd", 4), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  close(high);
  close(sv[1]);
  pt_destroy(p);
}

static CU_TestInfo scale_tests[] = {
    {"1,000 outstanding: socket reads, timers, file reads, each once",
     test_thousand_outstanding},
    {"1,000 reads closed away: TAXI_ECANCELED once each, in order",
     test_thousand_closed},
    {"1,000 exact reads queued on one socket: in order",
     test_thousand_on_one_socket},
    {"a handle beyond the backend's limit: TAXI_ETOOMANY",
     test_handle_beyond_limit},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_scale = {"scale", scale_tests, 120, NULL};
