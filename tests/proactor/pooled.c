/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/pooled.c - reads into the proactor's buffer pool
 * (taxi_proactor_read_pooled): single and multishot, every byte in order,
 * the pool running dry (a read waits, or the pool grows, and goes on once
 * buffers come back), end of stream, no allocation per read in the steady
 * state, and the calls refused: no pool, a second read behind a multishot
 * one, a buffer given back twice or one that is not the pool's, pool sizes
 * that are not powers of two.  On io_uring (6.0) the kernel picks the
 * buffers from a registered ring; elsewhere taxi does: the same program.
 */
#define _GNU_SOURCE 1

#include "helpers.h"
#include "suites.h"

#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/utsname.h>
#endif

static taxi_proactor_t *pl_proactor(unsigned count, unsigned max, size_t size) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.flags = util_proactor_flags;
  o.buffer_count = count;
  o.buffer_max = max;
  o.buffer_size = size;
  taxi_proactor_t *p = NULL;
  int rc = taxi_proactor_create(&p, &o);
  if (rc != 0) printf("\n    taxi_proactor_create = %s\n", taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

/* What a multishot read received, in order. */
typedef struct pl_sink {
  taxi_proactor_t *p;
  unsigned char got[1 << 17];
  size_t n;
  int deliveries, endings, more_ok, status;
  int hold; /* keep this many buffers instead of releasing */
  void *held[16];
  int nheld;
  int bad_release; /* a release that did not return 0 */
} pl_sink_t;

static void pl_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  pl_sink_t *k = act;
  if (status != 0) {
    k->endings++;
    k->status = status;
    if (op->more || op->data || bytes) k->more_ok = 0;
    return;
  }
  k->deliveries++;
  if (!op->data || bytes == 0 || k->n + bytes > sizeof k->got) {
    k->more_ok = 0;
    return;
  }
  memcpy(k->got + k->n, op->data, bytes);
  k->n += bytes;
  if (k->nheld < k->hold) {
    k->held[k->nheld++] = op->data;
    return;
  }
  if (taxi_proactor_buffer_release(k->p, op->data) != 0) k->bad_release++;
}

static void pl_release_held(pl_sink_t *k) {
  for (int i = 0; i < k->nheld; i++)
    CU_ASSERT_EQUAL(taxi_proactor_buffer_release(k->p, k->held[i]), 0);
  k->nheld = 0;
  k->hold = 0;
}

typedef struct pl_goal {
  pl_sink_t *k;
  size_t n;
} pl_goal_t;

static int pl_reached(void *arg) {
  pl_goal_t *g = arg;
  return g->k->n >= g->n;
}

static int pl_ended(void *arg) { return ((pl_sink_t *)arg)->endings > 0; }

static pl_sink_t *pl_sink(taxi_proactor_t *p) {
  pl_sink_t *k = calloc(1, sizeof *k);
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  k->p = p;
  k->more_ok = 1;
  return k;
}

/* Start the multishot pooled read on fd that feeds sink k. */
static void pl_read(taxi_proactor_t *p, taxi_op_t *op, int fd, pl_sink_t *k) {
  CU_ASSERT_EQUAL(
      taxi_proactor_read_pooled(p, op, fd, TAXI_READ_MULTISHOT, pl_on_read, k),
      0);
}

static void test_single(void) {
  taxi_proactor_t *p = pl_proactor(4, 0, 64);
  int sv[2];
  pt_pair(p, sv);
  taxi_op_t op = TAXI_OP_INIT;
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_read_pooled(p, &op, sv[0], 0, pt_on_done, &d),
                  0);
  CU_ASSERT_EQUAL(pt_peer_write(sv[1], "pooled", 6), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, 6);
  CU_ASSERT_EQUAL(d.more, 0);
  void *data = op.data;
  CU_ASSERT_PTR_NOT_NULL_FATAL(data);
  CU_ASSERT(memcmp(data, "pooled", 6) == 0);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.buffers, 4);
  CU_ASSERT_EQUAL(st.buffers_held, 1);
  /* Given back once; the second time, and anything that is not the start
   * of one of the pool's buffers, refused. */
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, (char *)data + 1),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, data), 0);
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, data), TAXI_ENOENT);
  char mine[64];
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, mine), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(NULL, data), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.buffers_held, 0);
  /* End of stream: no buffer. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_read_pooled(p, &op, sv[0], 0, pt_on_done, &d),
                  0);
  pt_close(&sv[1]);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_EEOF);
  CU_ASSERT_EQUAL(d.bytes, 0);
  CU_ASSERT_PTR_NULL(op.data);
  pt_destroy(p);
}

/* Write `total` bytes of a known pattern in uneven pieces. */
static void pl_send(int fd, size_t total, size_t from) {
  unsigned char buf[1000];
  size_t sent = 0;
  unsigned piece = 1;
  while (sent < total) {
    size_t n = piece % sizeof buf + 1;
    if (n > total - sent) n = total - sent;
    for (size_t i = 0; i < n; i++)
      buf[i] = (unsigned char)((from + sent + i) * 7u);
    if (pt_peer_write(fd, buf, n) != 0) {
      CU_FAIL("peer write");
      return;
    }
    sent += n;
    piece = piece * 37u + 11u;
  }
}

static int pl_pattern_ok(const pl_sink_t *k) {
  for (size_t i = 0; i < k->n; i++)
    if (k->got[i] != (unsigned char)(i * 7u)) return 0;
  return 1;
}

static void test_multishot_order(void) {
  taxi_proactor_t *p = pl_proactor(8, 0, 256);
  int sv[2];
  pt_pair(p, sv);
  pl_sink_t *k = pl_sink(p);
  taxi_op_t op = TAXI_OP_INIT;
  pl_read(p, &op, sv[0], k);
  const size_t total = 60000;
  for (size_t off = 0; off < total; off += 6000) {
    pl_send(sv[1], 6000, off);
    pl_goal_t g = {k, off + 6000};
    CU_ASSERT_EQUAL(pt_run_until(p, pl_reached, &g, pt_wait_ms()), 1);
  }
  CU_ASSERT_EQUAL(k->n, total);
  CU_ASSERT(pl_pattern_ok(k));
  CU_ASSERT(k->deliveries >= (int)(total / 256));
  CU_ASSERT_EQUAL(k->endings, 0);
  CU_ASSERT_EQUAL(k->bad_release, 0);
  CU_ASSERT(taxi_op_in_flight(&op));
  /* A second read on the handle could never run. */
  taxi_op_t other = TAXI_OP_INIT;
  char buf[8];
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(
      taxi_proactor_read_pooled(p, &other, sv[0], 0, pt_on_done, &d),
      TAXI_EBUSY);
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &other, sv[0], buf, sizeof buf, 0, pt_on_done, &d),
      TAXI_EBUSY);
  /* Closing ends it: one last call, without a buffer. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  CU_ASSERT_EQUAL(pt_run_until(p, pl_ended, k, pt_wait_ms()), 1);
  CU_ASSERT_EQUAL(k->endings, 1);
  CU_ASSERT_EQUAL(k->status, TAXI_ECANCELED);
  CU_ASSERT(k->more_ok);
  CU_ASSERT(!taxi_op_in_flight(&op));
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.buffers_held, 0);
  pt_close(&sv[1]);
  pt_destroy(p);
  free(k);
}

/* The pool runs dry while the handler holds every buffer: the read waits
 * (or, below the cap, the pool grows), and every byte still arrives, in
 * order, once the buffers come back. */
static void pl_dry(unsigned count, unsigned max) {
  taxi_proactor_t *p = pl_proactor(count, max, 16);
  int sv[2];
  pt_pair(p, sv);
  pl_sink_t *k = pl_sink(p);
  k->hold = (int)max;
  taxi_op_t op = TAXI_OP_INIT;
  pl_read(p, &op, sv[0], k);
  /* One piece per buffer and more: written one at a time, so that each
   * lands in a buffer of its own. */
  const size_t total = 16u * max * 3;
  for (size_t off = 0; off < 16u * max; off += 16) {
    unsigned char piece[16];
    for (size_t b = 0; b < sizeof piece; b++)
      piece[b] = (unsigned char)((off + b) * 7u);
    CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], piece, sizeof piece), 0);
    pl_goal_t g = {k, off + 16};
    CU_ASSERT_EQUAL(pt_run_until(p, pl_reached, &g, pt_wait_ms()), 1);
  }
  CU_ASSERT_EQUAL(k->nheld, (int)max);
  pl_send(sv[1], total - 16u * max, 16u * max);
  CU_ASSERT(pt_settle(p, 50) >= 0);
  /* Nothing more can arrive while every buffer is held. */
  CU_ASSERT_EQUAL(k->n, 16u * max);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.buffers, max);
  CU_ASSERT_EQUAL(st.buffers_held, max);
  CU_ASSERT(st.buffer_waits >= 1);
  if (max > count) CU_ASSERT(st.buffer_grows >= 1);
  printf("(waits %llu, grows %llu) ", (unsigned long long)st.buffer_waits,
         (unsigned long long)st.buffer_grows);
  pl_release_held(k);
  pl_goal_t g = {k, total};
  CU_ASSERT_EQUAL(pt_run_until(p, pl_reached, &g, pt_wait_ms()), 1);
  CU_ASSERT_EQUAL(k->n, total);
  CU_ASSERT(pl_pattern_ok(k));
  CU_ASSERT_EQUAL(k->endings, 0);
  CU_ASSERT(taxi_op_in_flight(&op));
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  CU_ASSERT_EQUAL(pt_run_until(p, pl_ended, k, pt_wait_ms()), 1);
  CU_ASSERT(k->more_ok);
  pt_close(&sv[1]);
  pt_destroy(p);
  free(k);
}

static void test_dry_waits(void) { pl_dry(4, 4); }
static void test_dry_grows(void) { pl_dry(2, 8); }

/* Peer closes with bytes still unread: they arrive, then the end. */
static void test_multishot_eof(void) {
  taxi_proactor_t *p = pl_proactor(4, 0, 128);
  int sv[2];
  pt_pair(p, sv);
  pl_sink_t *k = pl_sink(p);
  taxi_op_t op = TAXI_OP_INIT;
  pl_send(sv[1], 1000, 0);
  pt_close(&sv[1]);
  pl_read(p, &op, sv[0], k);
  CU_ASSERT_EQUAL(pt_run_until(p, pl_ended, k, pt_wait_ms()), 1);
  CU_ASSERT_EQUAL(k->n, 1000);
  CU_ASSERT(pl_pattern_ok(k));
  CU_ASSERT_EQUAL(k->status, TAXI_EEOF);
  CU_ASSERT(k->more_ok);
  pt_destroy(p);
  free(k);
}

/* Ping-pong over a multishot pooled read: no allocation per message. */
static void test_no_alloc(void) {
  CU_ASSERT_EQUAL_FATAL(util_alloc_install(), 0);
  taxi_proactor_t *p = pl_proactor(8, 0, 64);
  int sv[2];
  pt_pair(p, sv);
  pl_sink_t *k = pl_sink(p);
  taxi_op_t op = TAXI_OP_INIT;
  pl_read(p, &op, sv[0], k);
  const int warm = 50, rounds = 2000;
  util_alloc_counts_t before = {0};
  for (int i = 0; i < warm + rounds; i++) {
    if (i == warm) before = util_alloc_counts();
    unsigned char b = (unsigned char)(k->n * 7u);
    CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], &b, 1), 0);
    pl_goal_t g = {k, k->n + 1};
    CU_ASSERT_EQUAL_FATAL(pt_run_until(p, pl_reached, &g, pt_wait_ms()), 1);
  }
  util_alloc_counts_t after = util_alloc_counts();
  unsigned long long allocs =
      (after.mallocs - before.mallocs) + (after.reallocs - before.reallocs);
  printf("(%d messages, %llu allocations) ", rounds, allocs);
  CU_ASSERT_EQUAL(allocs, 0);
  CU_ASSERT(pl_pattern_ok(k));
  pt_close(&sv[1]);
  pt_destroy(p);
  free(k);
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  CU_ASSERT_EQUAL(util_alloc_uninstall(), 0);
}

/* Many multishot reads, every one with bytes before the proactor is next
 * dispatched: their completions come at once, more of them than a ring's
 * default share of completion entries (1,024 at depth 256).  None of the
 * reads may end for it: on io_uring a completion the CQ ring has no room
 * for overflows and ends its multishot read, which is then submitted
 * again - a request per arrival where there should be none. */
typedef struct pl_count {
  taxi_proactor_t *p;
  int deliveries, endings, bad;
} pl_count_t;

static void pl_on_count(taxi_op_t *op, int status, size_t bytes, void *act) {
  pl_count_t *c = act;
  if (status != 0) {
    c->endings++;
    return;
  }
  c->deliveries++;
  if (!op->data || bytes != 1 ||
      taxi_proactor_buffer_release(c->p, op->data) != 0)
    c->bad++;
}

typedef struct pl_count_goal {
  const pl_count_t *c;
  int deliveries, endings;
} pl_count_goal_t;

static int pl_counted(void *arg) {
  const pl_count_goal_t *g = arg;
  return g->c->deliveries >= g->deliveries && g->c->endings >= g->endings;
}

static void test_many_at_once(void) {
  /* Elsewhere the reads alone, on fewer: select takes descriptors below
   * FD_SETSIZE (1,024) only. */
  const int n = util_test_small() || !pt_backend_is("uring") ? 300 : 2000;
  if (!util_raise_nofile((unsigned long)n * 2 + 64)) {
    printf("(no descriptors for %d pairs: skipped) ", n);
    return;
  }
  taxi_proactor_t *p = pl_proactor(4096, 0, 64);
  int *fd = malloc((size_t)n * 2 * sizeof *fd);
  taxi_op_t *op = calloc((size_t)n, sizeof *op);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fd);
  CU_ASSERT_PTR_NOT_NULL_FATAL(op);
  pl_count_t c = {.p = p};
  for (int i = 0; i < n; i++) {
    pt_pair(p, fd + 2 * i);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read_pooled(p, &op[i], fd[2 * i], TAXI_READ_MULTISHOT,
                                  pl_on_count, &c),
        0);
  }
  CU_ASSERT(pt_settle(p, 20) >= 0); /* every read armed */
  for (int round = 1; round <= 3; round++) {
    for (int i = 0; i < n; i++)
      CU_ASSERT_EQUAL_FATAL(pt_peer_write(fd[2 * i + 1], "x", 1), 0);
    pl_count_goal_t g = {&c, round * n, 0};
    CU_ASSERT_EQUAL_FATAL(pt_run_until(p, pl_counted, &g, pt_wait_ms()), 1);
  }
  CU_ASSERT_EQUAL(c.bad, 0);
  CU_ASSERT_EQUAL(c.endings, 0);
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  printf("(%d reads, %d deliveries, %llu requests) ", n, c.deliveries,
         (unsigned long long)st.sqes);
  /* A request per read, and none per arrival (sqes is 0 where the
   * backend has no submission queue). */
  CU_ASSERT(st.sqes <= (uint64_t)n + (uint64_t)n / 10 + 8);
  /* Each read ends with its peer, before its record goes. */
  for (int i = 0; i < n; i++) pt_close(&fd[2 * i + 1]);
  pl_count_goal_t end = {&c, 0, n};
  CU_ASSERT_EQUAL(pt_run_until(p, pl_counted, &end, pt_wait_ms()), 1);
  pt_destroy(p); /* closes the attached ends */
  free(op);
  free(fd);
}

static void test_bad_input(void) {
  static const struct {
    unsigned count, max;
    size_t size;
  } bad[] = {
      {3, 0, 64}, {4, 2, 64},     {4, 6, 64},     {0, 4, 64},
      {0, 0, 64}, {65536, 0, 64}, {4, 65536, 64}, {4, 0, (1u << 20) + 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
    o.backend = pt_backend;
    o.buffer_count = bad[i].count;
    o.buffer_max = bad[i].max;
    o.buffer_size = bad[i].size;
    taxi_proactor_t *p = NULL;
    CU_ASSERT_EQUAL(taxi_proactor_create(&p, &o), TAXI_EINVAL);
    CU_ASSERT_PTR_NULL(p);
  }
  /* No pool: pooled reads and releases refused. */
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  taxi_op_t op = TAXI_OP_INIT;
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_read_pooled(p, &op, sv[0], 0, pt_on_done, &d),
                  TAXI_EINVAL);
  char x[8];
  CU_ASSERT_EQUAL(taxi_proactor_buffer_release(p, x), TAXI_EINVAL);
  pt_destroy(p);
  pt_close(&sv[1]);
  p = pl_proactor(4, 0, 64);
  pt_pair(p, sv);
  CU_ASSERT_EQUAL(
      taxi_proactor_read_pooled(p, &op, sv[0], 0x80, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_read_pooled(p, &op, sv[0], 0, NULL, &d),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_proactor_read_pooled(NULL, &op, sv[0], 0, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_read_pooled(p, &op, sv[1], 0, pt_on_done, &d),
                  TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  pt_destroy(p);
  pt_close(&sv[1]);
}

/* Whether the kernel has multishot receive (Linux 6.0), which the io_uring
 * backend's ring of provided buffers needs.  Elsewhere: no. */
static bool pl_kernel_has_recv_multishot(void) {
#ifdef __linux__
  struct utsname u;
  int major = 0;
  return uname(&u) == 0 && sscanf(u.release, "%d", &major) == 1 && major >= 6;
#else
  return false;
#endif
}

static void test_features(void) {
  taxi_proactor_t *p = pl_proactor(4, 0, 64);
  unsigned f = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &f), 0);
  if (!pt_backend_is("uring"))
    CU_ASSERT_EQUAL(f & TAXI_PFEAT_PROVIDED_BUFFERS, 0);
  /* Where the kernel can, the kernel picks: a build that compiled the
   * provided-buffer ring out (as one did, testing for an enumerator with
   * #if) must fail here. */
  if (pt_backend_is("uring") && !pt_reactor_variant() &&
      pl_kernel_has_recv_multishot())
    CU_ASSERT(f & TAXI_PFEAT_PROVIDED_BUFFERS);
  printf("(%s) ", (f & TAXI_PFEAT_PROVIDED_BUFFERS) ? "kernel picks buffers"
                                                    : "taxi picks buffers");
  pt_destroy(p);
}

static CU_TestInfo pooled_tests[] = {
    {"a single read; release once; end of stream", test_single},
    {"multishot: every byte in order; close ends it", test_multishot_order},
    {"pool dry at its cap: the read waits, then goes on", test_dry_waits},
    {"pool dry below its cap: it grows", test_dry_grows},
    {"multishot: bytes then end of stream", test_multishot_eof},
    {"no allocation per message", test_no_alloc},
    {"many multishot reads completing at once: none ends", test_many_at_once},
    {"bad input", test_bad_input},
    {"who picks the buffers", test_features},
    CU_TEST_INFO_NULL,
};
const taxi_test_suite_t pt_suite_pooled = {"pooled reads", pooled_tests, 120,
                                           NULL};
