/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/counters.c - what a stream tells about itself: its
 * counters after a known exchange, matching the context's totals; the
 * context's totals as the sum of its streams', closed and open; the two
 * refusals of a write, for room and for records; its write room and
 * watermarks.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the listening tests' streams ------------------------------------------
 */

/* What the accepted streams of each listening test are given: a row each
 * (ring: set the watermarks and the record count, else the defaults). */
typedef struct listen_case {
  bool ring;
  long high, low;
  unsigned max_writes;
  unsigned flags;
} listen_case_t;

enum { LC_KNOWN, LC_PAUSES, LC_REFUSALS, LC_TOTALS };

static const listen_case_t listen_cases[] = {
    [LC_KNOWN] = {true, 4096, 1024, 3, 0},
    [LC_PAUSES] = {false, 0, 0, 0, TAXI_STREAM_PAUSE_READING},
    [LC_REFUSALS] = {true, 4096, 0, 2, 0},
    [LC_TOTALS] = {false, 0, 0, 0, 0},
};

/* Create the context, listen with row lc's stream options (the listener
 * copies them) and start dispatching; *port is the port (-1 if the
 * listener was refused: the connect after it fails the test).  Returns 0,
 * or -1 if there is no context (st_io_create has said why). */
static int cn_listen(st_io_t *c, const listen_case_t *lc, taxi_accept_fn fn,
                     void *arg, int *port) {
  if (st_io_create(c) < 0) return -1;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  if (lc->ring) {
    so.high_watermark = lc->high;
    so.low_watermark = lc->low;
    so.max_writes = lc->max_writes;
  }
  so.flags |= lc->flags;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  *port = st_listen(c, &lo, fn, arg, NULL);
  st_io_run(c);
  return 0;
}

/* ---- counters after a known exchange ----------------------------------------
 */

struct known {
  taxi_stream_t *s;
  atomic_int closed, reads_seen, done_calls;
  int rc[6];
  taxi_stream_counters_t at_close;
  int at_close_rc;
};

static unsigned char big[3000], ref_bytes[10];

static void kn_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct known *k = arg;
  (void)s;
  (void)bytes;
  if (status == 0) atomic_fetch_add(&k->done_calls, 1);
}

static void kn_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct known *k = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    taxi_stream_end(s);
    return;
  }
  if (atomic_fetch_add(&k->reads_seen, 1) == 0) {
    /* 100 bytes in: 3110 out in three writes, two refused: one for room
     * (4096 bytes of ring: TAXI_EAGAIN), one for records (max_writes 3:
     * TAXI_ENOBUFS). */
    k->rc[0] = taxi_stream_write(s, data, len, kn_done, k);
    k->rc[1] =
        taxi_stream_write_ref(s, ref_bytes, sizeof ref_bytes, kn_done, k);
    k->rc[2] = taxi_stream_write(s, big, sizeof big, NULL, NULL);
    k->rc[3] = taxi_stream_write(s, big, 2000, NULL, NULL);
    k->rc[4] =
        taxi_stream_write_ref(s, ref_bytes, sizeof ref_bytes, kn_done, k);
  } else {
    /* 50 back, taken whether or not the completions of the first writes
     * have been seen yet (a Proactor's may come after this read's): it
     * joins the last write, which has no callback, or takes its record. */
    k->rc[5] = taxi_stream_write(s, data, len, NULL, NULL);
  }
}

static void kn_closed(taxi_stream_t *s, int reason) {
  struct known *k = taxi_stream_data(s);
  (void)reason;
  k->at_close_rc = taxi_stream_counters(s, &k->at_close);
  atomic_store(&k->closed, 1);
}

static void kn_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct known *k = arg;
  (void)l;
  k->s = s;
  taxi_stream_ref(s); /* read again after the close */
  taxi_stream_set_data(s, k);
  taxi_stream_on_close(s, kn_closed);
  taxi_stream_read_start(s, kn_read);
}

static void test_counters_known_exchange(void) {
  static struct known k;
  memset(&k, 0, sizeof k);
  /* Unset until the callbacks store them: no call returns 1. */
  for (int i = 0; i < 6; i++) k.rc[i] = 1;
  k.at_close_rc = 1;
  memset(big, 'b', sizeof big);
  memset(ref_bytes, 'r', sizeof ref_bytes);
  st_io_t c;
  int port;
  if (cn_listen(&c, &listen_cases[LC_KNOWN], kn_accept, &k, &port) < 0) return;
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  /* One message at a time, each answered before the next: a read each. */
  unsigned char in[4096], msg[100];
  memset(msg, 'm', sizeof msg);
  CU_ASSERT_EQUAL(net_send_all(fd, msg, 100), 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, in, 3110), 0);
  CU_ASSERT(memcmp(in, msg, 100) == 0 && in[100] == 'r' && in[110] == 'b');
  CU_ASSERT_EQUAL(net_send_all(fd, msg, 50), 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, in, 50), 0);
  shutdown(fd, SHUT_WR);
  CU_ASSERT_EQUAL(st_recv_to_eof(fd, in, sizeof in), 0);
  CU_ASSERT(util_wait_flag(&k.closed, 1, 10000));
  CU_ASSERT_EQUAL(k.rc[0], 0);
  CU_ASSERT_EQUAL(k.rc[1], 0);
  CU_ASSERT_EQUAL(k.rc[2], 0);
  CU_ASSERT_EQUAL(k.rc[3], TAXI_EAGAIN);
  CU_ASSERT_EQUAL(k.rc[4], TAXI_ENOBUFS);
  CU_ASSERT_EQUAL(k.rc[5], 0);
  CU_ASSERT_EQUAL(atomic_load(&k.done_calls), 2);

  const taxi_stream_counters_t *n = &k.at_close;
  CU_ASSERT_EQUAL(k.at_close_rc, 0);
  CU_ASSERT_EQUAL(n->bytes_in, 150);
  CU_ASSERT_EQUAL(n->bytes_out, 3160);
  CU_ASSERT_EQUAL(n->reads, 2);
  CU_ASSERT_EQUAL(n->writes, 4);
  CU_ASSERT_EQUAL(n->writes_refused, 2);
  CU_ASSERT_EQUAL(n->writes_no_record, 1);
  CU_ASSERT_EQUAL(n->read_pauses, 0);
  if (n->bytes_in != 150 || n->bytes_out != 3160 || n->reads != 2 ||
      n->writes != 4 || n->writes_refused != 2)
    printf("(in %llu out %llu reads %llu writes %llu refused %llu) ",
           (unsigned long long)n->bytes_in, (unsigned long long)n->bytes_out,
           (unsigned long long)n->reads, (unsigned long long)n->writes,
           (unsigned long long)n->writes_refused);
  /* The context's totals: this was its only stream. */
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.bytes_in, n->bytes_in);
  CU_ASSERT_EQUAL(st.bytes_out, n->bytes_out);
  CU_ASSERT_EQUAL(st.reads, n->reads);
  CU_ASSERT_EQUAL(st.writes, n->writes);
  CU_ASSERT_EQUAL(st.writes_refused, n->writes_refused);
  close(fd);
  st_io_destroy(&c);
  /* Still readable under the reference, and final. */
  taxi_stream_counters_t after;
  CU_ASSERT_EQUAL(taxi_stream_counters(k.s, &after), 0);
  CU_ASSERT(memcmp(&after, n, sizeof after) == 0);
  CU_ASSERT_EQUAL(taxi_stream_counters(NULL, &after), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_counters(k.s, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_unref(k.s), 0);
}

/* ---- the context's totals: its streams' counters, closed and open -------
 */

#define TT_STREAMS 4

/* The accepted streams of the totals test, in the order of their
 * connections (each connects once the one before has had its echo). */
struct totals {
  taxi_stream_t *s[TT_STREAMS];
  atomic_int accepted, closed[TT_STREAMS];
  taxi_stream_counters_t at_close[TT_STREAMS];
};

static void tt_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  if (status < 0 || taxi_stream_write(s, data, len, NULL, NULL) < 0)
    taxi_stream_end(s);
}

static void tt_closed(taxi_stream_t *s, int reason) {
  struct totals *t = taxi_stream_data(s);
  (void)reason;
  /* The second stream's block may be the fourth's again (it was not
   * referenced): the one still open is this one. */
  for (int i = 0; i < TT_STREAMS; i++)
    if (t->s[i] == s && !atomic_load(&t->closed[i])) {
      taxi_stream_counters(s, &t->at_close[i]);
      atomic_store(&t->closed[i], 1);
      break;
    }
}

static void tt_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct totals *t = arg;
  (void)l;
  int i = atomic_load(&t->accepted);
  if (i >= TT_STREAMS) {
    taxi_stream_close(s);
    return;
  }
  t->s[i] = s;
  /* All but the second referenced: a referenced stream leaves the
   * context's list at its close, an unreferenced one when its block is
   * released; the totals must keep what each counted either way. */
  if (i != 1) taxi_stream_ref(s);
  taxi_stream_set_data(s, t);
  taxi_stream_on_close(s, tt_closed);
  taxi_stream_read_start(s, tt_read);
  atomic_store(&t->accepted, i + 1);
}

/* Echo n bytes over fd: sent, then read back whole. */
static void tt_echo(int fd, size_t n) {
  unsigned char out[512], in[512];
  memset(out, 't', n);
  CU_ASSERT_EQUAL(net_send_all(fd, out, n), 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, in, n), 0);
}

/* The client has had its echo before the stream has counted its write:
 * wait until every echo is counted (as many writes as reads, and all the
 * bytes in and out) for each open stream from `from` to `to`, so that the
 * counters no longer move. */
struct tt_settle {
  struct totals *t;
  int from, to;
  const size_t *sizes;
};

static int tt_settled(void *arg) {
  struct tt_settle *w = arg;
  for (int i = w->from; i < w->to; i++) {
    taxi_stream_counters_t n;
    if (taxi_stream_counters(w->t->s[i], &n) < 0 || n.bytes_in != w->sizes[i] ||
        n.bytes_out != w->sizes[i] || n.reads == 0 || n.writes != n.reads)
      return 0;
  }
  return 1;
}

/* The context's per-message totals against the sum of the closed
 * streams' final counters and the open ones' current ones (the open ones
 * are [from, to)); bytes against `bytes` as well. */
/* The peers of streams from..to-1 end their side, and wait for the
 * streams' close callbacks. */
static void tt_close(int *fd, struct totals *t, int from, int to) {
  for (int i = from; i < to; i++) {
    shutdown(fd[i], SHUT_WR);
    unsigned char rest[16];
    CU_ASSERT_EQUAL(st_recv_to_eof(fd[i], rest, sizeof rest), 0);
    CU_ASSERT(util_wait_flag(&t->closed[i], 1, 10000));
    close(fd[i]);
  }
}

static void tt_check(st_io_t *c, struct totals *t, int from, int to,
                     uint64_t bytes) {
  taxi_stream_counters_t sum;
  memset(&sum, 0, sizeof sum);
  for (int i = 0; i < to; i++) {
    /* A close callback writes at_close[i] only for i < from. */
    taxi_stream_counters_t n;
    if (i < from)
      n = t->at_close[i];
    else
      CU_ASSERT_EQUAL_FATAL(taxi_stream_counters(t->s[i], &n), 0);
    sum.bytes_in += n.bytes_in;
    sum.bytes_out += n.bytes_out;
    sum.reads += n.reads;
    sum.writes += n.writes;
    sum.writes_refused += n.writes_refused;
    sum.read_pauses += n.read_pauses;
  }
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c->io, &st), 0);
  CU_ASSERT_EQUAL(st.bytes_in, bytes);
  CU_ASSERT_EQUAL(st.bytes_out, bytes);
  CU_ASSERT_EQUAL(st.bytes_in, sum.bytes_in);
  CU_ASSERT_EQUAL(st.bytes_out, sum.bytes_out);
  CU_ASSERT_EQUAL(st.reads, sum.reads);
  CU_ASSERT_EQUAL(st.writes, sum.writes);
  CU_ASSERT(st.reads >= (uint64_t)to);
  CU_ASSERT_EQUAL(st.writes_refused, 0);
  CU_ASSERT_EQUAL(st.read_pauses, 0);
  if (st.bytes_in != bytes || st.reads != sum.reads)
    printf("(in %llu of %llu, reads %llu of %llu) ",
           (unsigned long long)st.bytes_in, (unsigned long long)bytes,
           (unsigned long long)st.reads, (unsigned long long)sum.reads);
}

/* Three streams echo known byte counts; two close, the totals keep what
 * they counted; a fourth opens and echoes: the totals are exact, and
 * equal the streams' counters summed, at each step. */
static void test_counters_context_totals(void) {
  static struct totals t;
  memset(&t, 0, sizeof t);
  static const size_t sizes[TT_STREAMS] = {100, 200, 300, 400};
  st_io_t c;
  int port;
  if (cn_listen(&c, &listen_cases[LC_TOTALS], tt_accept, &t, &port) < 0) return;
  int fd[TT_STREAMS];
  for (int i = 0; i < 3; i++) {
    fd[i] = st_connect(port);
    CU_ASSERT_FATAL(fd[i] >= 0);
    tt_echo(fd[i], sizes[i]);
    CU_ASSERT_FATAL(util_wait_flag(&t.accepted, i + 1, 10000));
  }
  struct tt_settle w = {&t, 0, 3, sizes};
  CU_ASSERT(st_wait(tt_settled, &w, 10000));
  tt_check(&c, &t, 0, 3, 600);

  /* The first two end: their close callbacks have run, and the totals
   * still hold their bytes. */
  tt_close(fd, &t, 0, 2);
  tt_check(&c, &t, 2, 3, 600);

  fd[3] = st_connect(port);
  CU_ASSERT_FATAL(fd[3] >= 0);
  tt_echo(fd[3], sizes[3]);
  CU_ASSERT_FATAL(util_wait_flag(&t.accepted, 4, 10000));
  w.from = 2;
  w.to = 4;
  CU_ASSERT(st_wait(tt_settled, &w, 10000));
  tt_check(&c, &t, 2, 4, 1000);

  /* All closed: nothing lost as the last ones leave. */
  tt_close(fd, &t, 2, 4);
  tt_check(&c, &t, 4, 4, 1000);
  st_io_destroy(&c);
  for (int i = 0; i < TT_STREAMS; i++)
    if (i != 1) CU_ASSERT_EQUAL(taxi_stream_unref(t.s[i]), 0);
}

/* ---- reading paused, counted ------------------------------------------------
 */

struct paused {
  _Atomic(taxi_stream_t *) s;
  atomic_int closed;
  taxi_stream_counters_t at_close;
};

static void pz_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  if (status < 0 || taxi_stream_write(s, data, len, NULL, NULL) < 0)
    taxi_stream_end(s);
}

static void pz_closed(taxi_stream_t *s, int reason) {
  struct paused *z = taxi_stream_data(s);
  (void)reason;
  taxi_stream_counters(s, &z->at_close);
  atomic_store(&z->closed, 1);
}

static void pz_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct paused *z = arg;
  (void)l;
  taxi_stream_ref(s); /* the test reads its counters */
  /* A small send buffer (no autotuning to megabytes), so that the echo's
   * output backs up into the stream after tens of kilobytes, not after
   * however much the kernel would buffer: the pause comes soon even on a
   * loaded host. */
  int small = 4096;
  (void)setsockopt(taxi_stream_handle(s), SOL_SOCKET, SO_SNDBUF,
                   (const void *)&small, sizeof small);
  taxi_stream_set_data(s, z);
  taxi_stream_on_close(s, pz_closed);
  taxi_stream_read_start(s, pz_read);
  atomic_store(&z->s, s);
}

static uint64_t pauses_of(struct paused *z) {
  taxi_stream_t *s = atomic_load(&z->s);
  taxi_stream_counters_t n;
  if (!s || taxi_stream_counters(s, &n) < 0) return 0;
  return n.read_pauses;
}

/* An echo whose client sends and does not read: the echo fills the ring,
 * and with TAXI_STREAM_PAUSE_READING reading pauses (and is counted)
 * rather than a write being refused.  The client stops sending once the
 * counter says so, then reads every byte back. */
static void test_counters_read_pauses(void) {
  static struct paused z;
  memset(&z, 0, sizeof z);
  st_io_t c;
  int port;
  if (cn_listen(&c, &listen_cases[LC_PAUSES], pz_accept, &z, &port) < 0) return;
  int fd = st_connect_rcvbuf(port, 4096);
  CU_ASSERT_FATAL(fd >= 0);
  util_set_nonblock(fd);
  unsigned char buf[16384];
  uint64_t sent = 0, got = 0;
  taxi_time_t start = taxi_now();
  while (pauses_of(&z) == 0 && util_elapsed_ms(start) < 20000 &&
         sent < ((uint64_t)256 << 20)) {
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 10) != 1) continue;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = st_byte(5, sent + i);
    ssize_t k = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
    if (k > 0) sent += (uint64_t)k;
  }
  CU_ASSERT(pauses_of(&z) >= 1);
  shutdown(fd, SHUT_WR);
  int bad = 0;
  while (util_elapsed_ms(start) < 40000) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k <= 0) break;
    for (ssize_t i = 0; i < k; i++)
      if (buf[i] != st_byte(5, got + (uint64_t)i)) bad = 1;
    got += (uint64_t)k;
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(got, sent);
  CU_ASSERT(util_wait_flag(&z.closed, 1, 10000));
  CU_ASSERT_EQUAL(z.at_close.bytes_in, sent);
  CU_ASSERT_EQUAL(z.at_close.bytes_out, sent);
  CU_ASSERT_EQUAL(z.at_close.writes_refused, 0);
  CU_ASSERT(z.at_close.read_pauses >= 1);
  CU_ASSERT_EQUAL(z.at_close.writes, z.at_close.reads);
  close(fd);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(taxi_stream_unref(atomic_load(&z.s)), 0);
}

/* ---- the two refusals: room and records -----------------------------------
 */

struct refusals {
  int rc[7];
  atomic_int drains, closed, ref_done;
  int drain_rc, drain_rcount_full;
};

static unsigned char fill[5000];

static void rf_done(taxi_stream_t *s, int status, size_t b, void *arg) {
  struct refusals *r = arg;
  (void)s;
  (void)b;
  if (status == 0) atomic_fetch_add(&r->ref_done, 1);
}

static void rf_drain(taxi_stream_t *s) {
  struct refusals *r = taxi_stream_data(s);
  /* Called once a record is free: this write takes it. */
  if (atomic_fetch_add(&r->drains, 1) == 0) {
    r->drain_rc = taxi_stream_write_ref(s, fill, 10, rf_done, r);
    taxi_stream_end(s);
  }
}

static void rf_closed(taxi_stream_t *s, int reason) {
  struct refusals *r = taxi_stream_data(s);
  (void)reason;
  atomic_store(&r->closed, 1);
}

static void rf_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct refusals *r = arg;
  (void)l;
  taxi_stream_set_data(s, r);
  taxi_stream_on_close(s, rf_closed);
  taxi_stream_on_drain(s, rf_drain);
  /* In the accept callback nothing is sent yet: the queue is what these
   * calls made.  4096 bytes of ring, 2 records. */
  r->rc[0] = taxi_stream_write(s, fill, 5000, NULL, NULL);   /* too long */
  r->rc[1] = taxi_stream_write(s, fill, 3000, NULL, NULL);   /* record 1 */
  r->rc[2] = taxi_stream_write(s, fill, 2000, NULL, NULL);   /* no room */
  r->rc[3] = taxi_stream_write_ref(s, fill, 10, rf_done, r); /* record 2 */
  r->rc[4] = taxi_stream_write_ref(s, fill, 10, rf_done, r); /* no record */
  /* Room for 10 bytes, but they cannot join a zero-copy write. */
  r->rc[5] = taxi_stream_write(s, fill, 10, NULL, NULL);
  r->rc[6] = taxi_stream_sendfile(s, TAXI_INVALID_HANDLE, 0, 1, NULL, NULL);
}

static void test_write_refusal_codes(void) {
  static struct refusals r;
  memset(&r, 0, sizeof r);
  /* Unset until the callbacks store them: no call returns 1. */
  for (int i = 0; i < 7; i++) r.rc[i] = 1;
  r.drain_rc = 1;
  memset(fill, 'f', sizeof fill);
  st_io_t c;
  int port;
  if (cn_listen(&c, &listen_cases[LC_REFUSALS], rf_accept, &r, &port) < 0)
    return;
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  static char in[8192];
  long n = st_recv_to_eof(fd, in, sizeof in);
  CU_ASSERT(util_wait_flag(&r.closed, 1, 10000));
  CU_ASSERT_EQUAL(r.rc[0], TAXI_EINVAL);
  CU_ASSERT_EQUAL(r.rc[1], 0);
  CU_ASSERT_EQUAL(r.rc[2], TAXI_EAGAIN);
  CU_ASSERT_EQUAL(r.rc[3], 0);
  CU_ASSERT_EQUAL(r.rc[4], TAXI_ENOBUFS);
  CU_ASSERT_EQUAL(r.rc[5], TAXI_ENOBUFS);
  CU_ASSERT_EQUAL(r.rc[6], TAXI_EBADF);
  /* Told once, when a record was free, so that the write made there was
   * taken; every byte then reached the peer. */
  CU_ASSERT_EQUAL(atomic_load(&r.drains), 1);
  CU_ASSERT_EQUAL(r.drain_rc, 0);
  CU_ASSERT_EQUAL(n, 3020);
  CU_ASSERT_EQUAL(atomic_load(&r.ref_done), 2);
  close(fd);
  st_io_destroy(&c);
}

/* ---- room and watermarks ----------------------------------------------------
 */

static void rm_done(taxi_stream_t *s, int status, size_t b, void *arg) {
  (void)s;
  (void)b;
  (void)arg;
  CU_ASSERT_EQUAL(status, TAXI_ECANCELED); /* closed before it went */
}

/* A stream of a socket pair's end in a context nothing dispatches: what
 * it queues stays queued, so the room is exact. */
static void test_room_and_watermarks(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int sv[2];
  CU_ASSERT_FATAL(util_socketpair(sv) == 0);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = 4096;
  so.low_watermark = 1024;
  taxi_stream_t *s;
  CU_ASSERT_FATAL(taxi_stream_open(&s, c.io, sv[0], &so) == 0);
  taxi_stream_ref(s);
  size_t low = 0, high = 0;
  CU_ASSERT_EQUAL(taxi_stream_watermarks(s, &low, &high), 0);
  CU_ASSERT_EQUAL(low, 1024);
  CU_ASSERT_EQUAL(high, 4096);
  CU_ASSERT_EQUAL(taxi_stream_watermarks(s, NULL, &high), 0);
  CU_ASSERT_EQUAL(taxi_stream_watermarks(NULL, &low, &high), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 4096);
  CU_ASSERT_EQUAL(taxi_stream_write(s, fill, 1000, NULL, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 3096);
  CU_ASSERT_EQUAL(taxi_stream_write_queued(s), 1000);
  CU_ASSERT_EQUAL(taxi_stream_write(s, fill, 3096, NULL, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_write(s, fill, 1, NULL, NULL), TAXI_EAGAIN);
  /* Zero-copy writes take no room. */
  CU_ASSERT_EQUAL(taxi_stream_write_ref(s, fill, 10, rm_done, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_queued(s), 4096);
  /* No more writes: no room. */
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(NULL), 0);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(taxi_stream_watermarks(s, &low, &high), 0);
  CU_ASSERT_EQUAL(high, 4096);
  CU_ASSERT_EQUAL(taxi_stream_unref(s), 0);
  close(sv[1]);
}

CU_TestInfo st_tests_counters[] = {
    {"write room and watermarks", test_room_and_watermarks},
    {"write refusals: TAXI_EAGAIN for room, TAXI_ENOBUFS for records",
     test_write_refusal_codes},
    {"a stream's counters after a known exchange",
     test_counters_known_exchange},
    {"a stream's counters: reading paused for backpressure",
     test_counters_read_pauses},
    {"the context's totals: its streams' counters, closed and open",
     test_counters_context_totals},
    CU_TEST_INFO_NULL,
};
