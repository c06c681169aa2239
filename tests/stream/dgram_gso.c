/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_gso.c - segments and coalesced receives of datagram
 * endpoints (TAXI_DGRAM_GSO, TAXI_DGRAM_GRO, taxi_dgram_send_segments)
 * over the pair under test: segments arrive as separate datagrams with
 * their bytes, with and without GSO; a receiver with GRO gets every
 * datagram whole and in order; the refusals.  Where the system has no
 * UDP_SEGMENT or UDP_GRO the tests check the refusal and say so, as on
 * the Proactor's dispatchers, which refuse TAXI_DGRAM_GRO (their receives
 * bring no segment size).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>

static void ignore(taxi_dgram_t *d, int status, const void *data, size_t len,
                   const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)d, (void)status, (void)data, (void)len, (void)from, (void)flags;
  (void)arg;
}

/* Open an endpoint on 127.0.0.1:0 with `flags`; 0, or 1 when the system
 * lacks what they ask (refused with TAXI_ENOTSUP and a detail naming the
 * flag: said, and the test skips). */
static int open_with(st_io_t *c, unsigned flags, taxi_dgram_recv_fn fn,
                     void *arg, taxi_dgram_t **out) {
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.flags = flags;
  o.recv_batch = 16;
  int rc = taxi_dgram_open(out, c->io, "127.0.0.1:0", &o, fn, arg);
  if (rc == TAXI_ENOTSUP) {
    const char *why = taxi_error_detail();
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "options.flags"));
    printf("skipped: %s\n", why);
    return 1;
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return 0;
}

static void addr_of_endpoint(taxi_dgram_t *d, taxi_addr_t *a) {
  CU_ASSERT_EQUAL(taxi_dgram_address(d, a), 0);
}

/* The datagram numbered seq: its 4-byte number, then st_byte(seq, i). */
static void fill(unsigned char *p, size_t len, unsigned seq) {
  for (size_t i = 0; i < len; i++) p[i] = st_byte(seq, i);
  if (len >= 4) memcpy(p, &seq, 4);
}

/* What a receiver saw: datagrams numbered from 0 on, each checked against
 * the length the sender used (len_of). */
struct rx {
  atomic_uint got;   /* datagrams received */
  atomic_uint bad;   /* wrong bytes or length, or truncated */
  atomic_uint order; /* numbers out of order, or missing */
  atomic_int errors;
  size_t (*len_of)(unsigned seq);
};

static void rx_recv(taxi_dgram_t *d, int status, const void *data, size_t len,
                    const taxi_addr_t *from, unsigned flags, void *arg) {
  struct rx *r = arg;
  (void)d;
  (void)from;
  if (status < 0) {
    atomic_fetch_add(&r->errors, 1);
    return;
  }
  unsigned want = atomic_load(&r->got);
  unsigned seq = want;
  if (len >= 4) memcpy(&seq, data, 4);
  if (seq != want) atomic_fetch_add(&r->order, 1);
  int ok = len == r->len_of(seq) && !(flags & TAXI_DGRAM_TRUNCATED);
  for (size_t i = 4; ok && i < len; i++)
    ok = ((const unsigned char *)data)[i] == st_byte(seq, i);
  if (!ok) atomic_fetch_add(&r->bad, 1);
  atomic_store(&r->got, want + 1);
}

struct want {
  atomic_uint *v;
  unsigned n;
};
static int reached(void *arg) {
  struct want *w = arg;
  return atomic_load(w->v) >= w->n;
}

static int closed_flag(void *arg) { return atomic_load((atomic_int *)arg); }
static void on_closed(taxi_dgram_t *d, void *arg) {
  (void)d;
  atomic_store((atomic_int *)arg, 1);
}
static void close_wait(taxi_dgram_t *d) {
  atomic_int closed = 0;
  CU_ASSERT_EQUAL(taxi_dgram_close(d, on_closed, &closed), 0);
  CU_ASSERT_TRUE(st_wait(closed_flag, &closed, 10000));
}

/* ---- segments arrive as separate datagrams --------------------------------
 */

#define SEG 1200
#define LAST 500 /* the last segment of each run, shorter */
#define RUN 11   /* segments per call: ten of SEG and one of LAST */

static size_t seg_len(unsigned seq) {
  return seq % RUN == RUN - 1 ? LAST : SEG;
}

/* `calls` runs of RUN segments from an endpoint with `flags` to a plain
 * one, each run one taxi_dgram_send_segments call of its bytes laid end to
 * end; every datagram checked.  Returns the sender's segment_sends. */
static long segments_over(unsigned flags, unsigned calls) {
  st_io_t c;
  long sends = -1;
  if (st_io_create(&c) < 0) return -1;
  st_io_run(&c);
  taxi_dgram_t *rcv, *snd;
  struct rx r = {.len_of = seg_len};
  if (open_with(&c, 0, rx_recv, &r, &rcv)) goto stop;
  if (open_with(&c, flags, ignore, NULL, &snd)) {
    close_wait(rcv);
    goto stop;
  }
  taxi_addr_t to;
  addr_of_endpoint(rcv, &to);
  static unsigned char buf[(RUN - 1) * SEG + LAST];
  for (unsigned k = 0; k < calls; k++) {
    for (unsigned i = 0; i < RUN; i++)
      fill(buf + (size_t)i * SEG, seg_len(k * RUN + i), k * RUN + i);
    CU_ASSERT_EQUAL(taxi_dgram_send_segments(snd, buf, sizeof buf, SEG, &to),
                    0);
    /* A window of one run: loopback drops nothing then. */
    struct want w = {&r.got, (k + 1) * RUN};
    CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
    if (atomic_load(&r.got) != (k + 1) * RUN) break;
  }
  CU_ASSERT_EQUAL(atomic_load(&r.got), calls * RUN);
  CU_ASSERT_EQUAL(atomic_load(&r.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.order), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.errors), 0);
  taxi_dgram_counters_t n;
  CU_ASSERT_EQUAL(taxi_dgram_counters(snd, &n), 0);
  sends = (long)n.segment_sends;
  CU_ASSERT_EQUAL(taxi_dgram_counters(rcv, &n), 0);
  CU_ASSERT_EQUAL(n.received, (uint64_t)calls * RUN);
  CU_ASSERT_EQUAL(n.coalesced, 0); /* no GRO asked */
  close_wait(snd);
  close_wait(rcv);
stop:
  st_io_stop(&c);
  st_io_destroy(&c);
  return sends;
}

static void test_dgram_gso_segments(void) {
  long sends = segments_over(TAXI_DGRAM_GSO, 50);
  /* Loopback takes segments: every call was one system call. */
  if (sends >= 0) CU_ASSERT_EQUAL(sends, 50);
}

/* Without TAXI_DGRAM_GSO the same calls go as batches of datagrams. */
static void test_dgram_segments_batched(void) {
  long sends = segments_over(0, 50);
  if (sends >= 0) CU_ASSERT_EQUAL(sends, 0);
}

/* ---- coalesced receives split back ----------------------------------------
 */

#define GRO_SEG 1000
static size_t gro_len(unsigned seq) { return seq % 7 == 6 ? 300 : GRO_SEG; }

/* A sender with GSO sends runs of 7 datagrams (six of GRO_SEG bytes, one
 * of 300) in one call each, with single datagrams between them; the
 * receiver has GRO: the kernel hands it runs whole, which it must split
 * back into the datagrams, each whole and in order. */
static void test_dgram_gro_in_order(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  taxi_dgram_t *rcv, *snd;
  struct rx r = {.len_of = gro_len};
  if (open_with(&c, TAXI_DGRAM_GRO, rx_recv, &r, &rcv)) goto stop;
  if (open_with(&c, TAXI_DGRAM_GSO, ignore, NULL, &snd)) {
    close_wait(rcv);
    goto stop;
  }
  taxi_addr_t to;
  addr_of_endpoint(rcv, &to);
  enum { CALLS = 300, PER = 7 };
  static unsigned char buf[PER * GRO_SEG];
  unsigned seq = 0;
  for (unsigned k = 0; k < CALLS; k++) {
    if (k % 3 == 2) {
      /* One datagram on its own, as send_to sends it. */
      size_t len = gro_len(seq);
      fill(buf, len, seq);
      CU_ASSERT_EQUAL(taxi_dgram_send_to(snd, buf, len, &to), 0);
      seq++;
    }
    /* The rest of the current run of PER, in one call. */
    size_t len = 0;
    unsigned first = seq;
    while (seq == first || seq % PER != 0) {
      fill(buf + len, gro_len(seq), seq);
      len += gro_len(seq);
      seq++;
    }
    CU_ASSERT_EQUAL(taxi_dgram_send_segments(snd, buf, len, GRO_SEG, &to), 0);
    /* Windows of three calls: fast, and within the socket's buffer. */
    if (k % 3 == 2) {
      struct want w = {&r.got, seq};
      CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
      if (atomic_load(&r.got) != seq) break;
    }
  }
  struct want w = {&r.got, seq};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&r.got), seq);
  CU_ASSERT_EQUAL(atomic_load(&r.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.order), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.errors), 0);
  taxi_dgram_counters_t n;
  CU_ASSERT_EQUAL(taxi_dgram_counters(rcv, &n), 0);
  CU_ASSERT_EQUAL(n.received, seq);
  /* Whether loopback hands segments over coalesced is the kernel's
   * choice (it does since Linux 5.x for a receiver with UDP_GRO). */
  if (n.coalesced == 0)
    printf(
        "the kernel coalesced no receive here: the split is not "
        "exercised\n");
  else
    CU_ASSERT_TRUE(n.coalesced <= n.received / 2);
  close_wait(snd);
  close_wait(rcv);
stop:
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- refusals -------------------------------------------------------------
 */

/* rc is TAXI_EINVAL and the detail names `field`. */
static void refused(int rc, const char *field) {
  CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
  const char *why = taxi_error_detail();
  CU_ASSERT_TRUE(why && strstr(why, field));
  if (!why || !strstr(why, field))
    printf("detail \"%s\" does not name %s\n", why ? why : "", field);
}

static void test_dgram_segments_refused(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_dgram_t *d;
  if (open_with(&c, 0, ignore, NULL, &d)) goto out;
  taxi_addr_t to;
  addr_of_endpoint(d, &to);
  static unsigned char buf[(TAXI_DGRAM_SEGMENTS_MAX + 1) * 100];
  refused(taxi_dgram_send_segments(d, buf, 100, 0, &to), "seg");
  refused(taxi_dgram_send_segments(d, buf, 100, TAXI_DGRAM_MAX + 1, &to),
          "seg");
  refused(taxi_dgram_send_segments(d, buf, (TAXI_DGRAM_SEGMENTS_MAX + 1) * 100,
                                   100, &to),
          "len");
  /* One byte over the most segments is one segment too many. */
  refused(taxi_dgram_send_segments(d, buf, TAXI_DGRAM_SEGMENTS_MAX * 100 + 1,
                                   100, &to),
          "len");
  refused(taxi_dgram_send_segments(d, buf, 0, 100, &to), "len");
  refused(taxi_dgram_send_segments(d, NULL, 100, 100, &to), "data");
  refused(taxi_dgram_send_segments(NULL, buf, 100, 100, &to), "d");
  refused(taxi_dgram_counters(d, NULL), "out");
  /* The most segments, and the largest segment, are taken. */
  CU_ASSERT_EQUAL(
      taxi_dgram_send_segments(d, buf, TAXI_DGRAM_SEGMENTS_MAX * 100, 100, &to),
      0);
  static unsigned char big[TAXI_DGRAM_MAX];
  CU_ASSERT_EQUAL(
      taxi_dgram_send_segments(d, big, sizeof big, TAXI_DGRAM_MAX, &to), 0);
  /* No default peer. */
  CU_ASSERT_EQUAL(taxi_dgram_send_segments(d, buf, 100, 10, NULL), TAXI_ENOENT);
  /* GRO needs buffers that take what the kernel coalesces. */
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.flags = TAXI_DGRAM_GRO;
  o.recv_size = 2048;
  taxi_dgram_t *g;
  refused(taxi_dgram_open(&g, c.io, "127.0.0.1:0", &o, ignore, NULL),
          "options.recv_size");
  o.flags = 0x80000000u;
  o.recv_size = 0;
  refused(taxi_dgram_open(&g, c.io, "127.0.0.1:0", &o, ignore, NULL),
          "options.flags");
  st_io_run(&c);
  close_wait(d);
  st_io_stop(&c);
out:
  st_io_destroy(&c);
}

CU_TestInfo st_tests_dgram_gso[] = {
    {"dgram_gso_segments", test_dgram_gso_segments},
    {"dgram_segments_batched", test_dgram_segments_batched},
    {"dgram_gro_in_order", test_dgram_gro_in_order},
    {"dgram_segments_refused", test_dgram_segments_refused},
    CU_TEST_INFO_NULL};
