/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/cancel.c - cancellation, close and detach with operations
 * pending, and destroy with operations in flight.
 *
 * What must hold: every operation completes exactly once; a cancelled one
 * with TAXI_ECANCELED (unless it finished first); per handle and direction
 * in issue order; a cancelled write reports exactly the bytes that reached
 * the peer, so the stream stays usable; cancelling a record not in flight
 * is TAXI_ENOENT and harmless.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static size_t cn_big_size(void) {
#if defined(_WIN32)
  /* The pairs are loopback TCP there (no socketpair); under wine the
   * Linux TCP buffers take several megabytes before a send waits. */
  return (size_t)32 << 20;
#endif
  return pt_small() ? (size_t)2 << 20 : (size_t)8 << 20;
}

/* A pending read, cancelled: one completion with TAXI_ECANCELED and 0
 * bytes; cancelling again is TAXI_ENOENT; the socket still works. */
static void test_cancel_pending_read(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char buf[16];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d), 0);
  pt_settle(p, 10); /* let it be submitted */
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(d.bytes, 0);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_READ);
  CU_ASSERT_EQUAL(d.in_flight, 0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  /* Completed already: harmless. */
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), TAXI_ENOENT);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);

  taxi_proactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &s), 0);
  CU_ASSERT(s.cancelled >= 1);

  /* The socket still works, and no byte was eaten by the cancelled read. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, 5,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], "hello", 5), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, 5);
  CU_ASSERT_EQUAL(memcmp(buf, "hello", 5), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Cancel twice before the completion is dispatched: the second request is
 * harmless (0 or TAXI_ENOENT) and the handler still runs once. */
static void test_cancel_twice(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char buf[16];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  int rc = taxi_proactor_cancel(p, &op);
  CU_ASSERT(rc == 0 || rc == TAXI_ENOENT);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), TAXI_ENOENT);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A record never started, and bad arguments. */
static void test_cancel_not_started(void) {
  taxi_proactor_t *p = pt_proactor();
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(NULL, &op), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, NULL), TAXI_EINVAL);
  pt_destroy(p);
}

static struct sockaddr_in cn_loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* A pending accept (single and multishot), cancelled: one completion with
 * TAXI_ECANCELED (more clear); the listener still accepts afterwards. */
static void cn_cancel_accept(unsigned flags) {
  taxi_proactor_t *p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(p, &op, lfd, flags, pt_on_done, &d), 0);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&d.more_calls), 0);
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_ACCEPT);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  /* The listener still accepts. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_accept(p, &op, lfd, 0, pt_on_done, &d),
                        0);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = cn_loopback(port);
  CU_ASSERT_FATAL(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  if (d.status == 0) CU_ASSERT_EQUAL(taxi_proactor_close(p, d.accepted), 0);
  close(c);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

static void test_cancel_accept(void) { cn_cancel_accept(0); }
static void test_cancel_multishot_accept(void) {
  cn_cancel_accept(TAXI_ACCEPT_MULTISHOT);
}

/* Exact reads of 10 bytes queued on one stream, one of them cancelled
 * before any byte came: it completes with TAXI_ECANCELED and takes no
 * bytes, the others are not run for it, and then get the stream's bytes
 * in their order.  The cases differ in where the cancelled read stands. */
typedef struct cn_queue_case {
  int reads;  /* queued, at most CN_QUEUE_MAX */
  int cancel; /* the one cancelled */
  uint64_t seed;
} cn_queue_case_t;

#define CN_QUEUE_MAX 3

static const cn_queue_case_t cn_queue_cases[] = {
    {3, 1, 40}, /* the middle: queued, not yet started */
    {2, 0, 41}, /* the head: the read given to the OS */
};

static void cn_cancel_in_queue(const cn_queue_case_t *k) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  static unsigned char buf[CN_QUEUE_MAX][10], msg[10 * (CN_QUEUE_MAX - 1)];
  size_t len = 10 * (size_t)(k->reads - 1);
  pt_fill(msg, len, k->seed);
  static taxi_op_t ops[CN_QUEUE_MAX];
  static pt_done_t d[CN_QUEUE_MAX];
  for (int i = 0; i < k->reads; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &ops[i], sv[0], buf[i], 10, TAXI_READ_EXACT,
                           pt_on_done, &d[i]),
        0);
  }
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &ops[k->cancel]), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d[k->cancel], 1));
  CU_ASSERT_EQUAL(d[k->cancel].status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(d[k->cancel].bytes, 0);
  for (int i = 0; i < k->reads; i++)
    if (i != k->cancel) CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, len), 0);
  int got = 0, prev = -1;
  for (int i = 0; i < k->reads; i++) {
    if (i == k->cancel) continue;
    CU_ASSERT_FATAL(pt_run_done(p, &d[i], 1));
    CU_ASSERT_EQUAL(d[i].status, 0);
    CU_ASSERT_EQUAL(d[i].bytes, 10);
    CU_ASSERT_EQUAL(memcmp(buf[i], msg + 10 * got, 10), 0);
    if (prev >= 0) CU_ASSERT(d[i].seq > d[prev].seq);
    prev = i;
    got++;
  }
  pt_settle(p, 10);
  for (int i = 0; i < k->reads; i++)
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
  pt_close(&sv[1]);
  pt_destroy(p);
}

static void test_cancel_middle_of_queue(void) {
  cn_cancel_in_queue(&cn_queue_cases[0]);
}

static void test_cancel_head_of_queue(void) {
  cn_cancel_in_queue(&cn_queue_cases[1]);
}

/* A big write that cannot finish (the peer reads nothing) is cancelled:
 * it completes with TAXI_ECANCELED and reports the bytes that went out,
 * and those are exactly what the peer then reads before the next write's
 * bytes: the stream is not corrupted. */
static void test_cancel_write_in_progress(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  size_t len = cn_big_size();
  unsigned char *data = malloc(len);
  CU_ASSERT_FATAL(data != NULL);
  pt_fill(data, len, 42);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {data, len};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  pt_settle(p, 30);
  CU_ASSERT_EQUAL_FATAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT(d.bytes < len);
  size_t sent = d.bytes < len ? d.bytes : 0;

  char marker[] = "<marker>";
  taxi_buf_t mb = {marker, sizeof marker};
  pt_done_t dm;
  pt_done_init(&dm);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &mb, 1, pt_on_done, &dm), 0);
  unsigned char *got = malloc(sent + sizeof marker);
  CU_ASSERT_FATAL(got != NULL);
  size_t have = 0;
  /* The peer reads while this thread dispatches the marker's write. */
  taxi_time_t start = taxi_now();
  while (have < sent + sizeof marker && util_elapsed_ms(start) < pt_wait_ms()) {
    ssize_t n = read(sv[1], got + have, sent + sizeof marker - have);
    if (n > 0) {
      have += (size_t)n;
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
    taxi_proactor_handle_events(p, 1);
  }
  CU_ASSERT(pt_run_done(p, &dm, 1));
  CU_ASSERT_EQUAL(dm.status, 0);
  CU_ASSERT_EQUAL(have, sent + sizeof marker);
  CU_ASSERT_EQUAL(pt_diff(got, data, sent), -1);
  CU_ASSERT_EQUAL(memcmp(got + sent, marker, sizeof marker), 0);
  char extra;
  CU_ASSERT(read(sv[1], &extra, 1) < 0 && errno == EAGAIN);
  free(got);
  free(data);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* taxi_proactor_close with several reads and writes queued: nothing runs
 * inside the call; then each completes exactly once with TAXI_ECANCELED,
 * in issue order per direction; the handle is closed (the peer sees the
 * end) and forgotten (TAXI_ENOENT). */
static void test_close_with_queued_ops(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { NR = 3, NW = 3 };
  static char rbuf[NR][16];
  size_t big = cn_big_size();
  unsigned char *data = malloc(big);
  CU_ASSERT_FATAL(data != NULL);
  pt_fill(data, big, 43);
  static taxi_op_t rops[NR], wops[NW];
  static pt_done_t rd[NR], wd[NW];
  for (int i = 0; i < NR; i++) {
    taxi_op_init(&rops[i]);
    pt_done_init(&rd[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &rops[i], sv[0], rbuf[i], 16,
                           i == 1 ? TAXI_READ_EXACT : 0, pt_on_done, &rd[i]),
        0);
  }
  for (int i = 0; i < NW; i++) {
    taxi_op_init(&wops[i]);
    pt_done_init(&wd[i]);
    taxi_buf_t b = {data, i == 0 ? big : 100};
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_write(p, &wops[i], sv[0], &b, 1, pt_on_done, &wd[i]), 0);
  }
  pt_settle(p, 30);
  for (int i = 0; i < NR; i++) CU_ASSERT_EQUAL(atomic_load(&rd[i].calls), 0);
  for (int i = 0; i < NW; i++) CU_ASSERT_EQUAL(atomic_load(&wd[i].calls), 0);
  int fd = sv[0];
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_close(p, fd), 0);
  /* Not run inside close. */
  for (int i = 0; i < NR; i++) CU_ASSERT_EQUAL(atomic_load(&rd[i].calls), 0);
  for (int i = 0; i < NW; i++) CU_ASSERT_EQUAL(atomic_load(&wd[i].calls), 0);
  CU_ASSERT(pt_run_done(p, &rd[NR - 1], 1));
  CU_ASSERT(pt_run_done(p, &wd[NW - 1], 1));
  pt_settle(p, 30);
  for (int i = 0; i < NR; i++) {
    CU_ASSERT_EQUAL(atomic_load(&rd[i].calls), 1);
    CU_ASSERT_EQUAL(rd[i].status, TAXI_ECANCELED);
    CU_ASSERT_EQUAL(rd[i].bytes, 0);
    CU_ASSERT_EQUAL(taxi_op_in_flight(&rops[i]), 0);
    if (i > 0) CU_ASSERT(rd[i].seq > rd[i - 1].seq);
  }
  for (int i = 0; i < NW; i++) {
    CU_ASSERT_EQUAL(atomic_load(&wd[i].calls), 1);
    CU_ASSERT_EQUAL(wd[i].status, TAXI_ECANCELED);
    CU_ASSERT_EQUAL(taxi_op_in_flight(&wops[i]), 0);
    if (i > 0) CU_ASSERT(wd[i].seq > wd[i - 1].seq);
  }
  CU_ASSERT(wd[0].bytes < big);
  CU_ASSERT_EQUAL(wd[1].bytes, 0);
  CU_ASSERT_EQUAL(wd[2].bytes, 0);
  /* Forgotten. */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, fd), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, fd), TAXI_ENOENT);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &rops[0], fd, rbuf[0], 16, 0, pt_on_done, &d),
      TAXI_ENOENT);
  /* Closed: the peer reads what was sent of the first write, then EOF. */
  long n = pt_peer_read_to_eof(sv[1]);
  CU_ASSERT_EQUAL(n, (long)wd[0].bytes);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  free(data);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* taxi_proactor_detach with a read pending: it completes with
 * TAXI_ECANCELED, the descriptor stays open and usable, and it can be
 * attached again. */
static void test_detach_with_pending(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char buf[8];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_detach(p, sv[0]), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(d.bytes, 0);
  /* Still open: usable with plain calls. */
  CU_ASSERT(fcntl(sv[0], F_GETFD) >= 0);
  CU_ASSERT_EQUAL(pt_peer_write(sv[0], "abc", 3), 0);
  char got[3];
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], got, 3, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(got, "abc", 3), 0);
  /* Forgotten, then attached again. */
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d),
      TAXI_ENOENT);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, sv[0]), 0);
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, 8,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], "12345678", 8), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(memcmp(buf, "12345678", 8), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, sv[0]), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A completion handler closes another handle that has operations pending
 * and cancels a third one's read: each of those completes once with
 * TAXI_ECANCELED. */
typedef struct cn_closer {
  taxi_proactor_t *p;
  int victim;
  taxi_op_t *cancel_me;
  int close_rc, cancel_rc;
  atomic_int calls;
} cn_closer_t;

static void cn_on_timer(taxi_op_t *op, int status, size_t bytes, void *act) {
  cn_closer_t *c = act;
  (void)op;
  (void)status;
  (void)bytes;
  c->close_rc = taxi_proactor_close(c->p, c->victim);
  c->cancel_rc = taxi_proactor_cancel(c->p, c->cancel_me);
  atomic_fetch_add(&c->calls, 1);
}

static void test_close_and_cancel_from_handler(void) {
  taxi_proactor_t *p = pt_proactor();
  int a[2], b[2];
  pt_pair(p, a);
  pt_pair(p, b);
  char buf[4][8];
  static taxi_op_t ops[3], top;
  static pt_done_t d[3];
  for (int i = 0; i < 3; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
  }
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &ops[0], a[0], buf[0], 8, 0, pt_on_done, &d[0]), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &ops[1], a[0], buf[1], 8, 0, pt_on_done, &d[1]), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &ops[2], b[0], buf[2], 8, 0, pt_on_done, &d[2]), 0);
  static cn_closer_t c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.victim = a[0];
  c.cancel_me = &ops[2];
  taxi_op_init(&top);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_timer(p, &top, 0, cn_on_timer, &c), 0);
  CU_ASSERT_FATAL(pt_run_count(p, &c.calls, 1));
  CU_ASSERT_EQUAL(c.close_rc, 0);
  CU_ASSERT_EQUAL(c.cancel_rc, 0);
  for (int i = 0; i < 3; i++) CU_ASSERT(pt_run_done(p, &d[i], 1));
  pt_settle(p, 20);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, TAXI_ECANCELED);
  }
  CU_ASSERT(d[1].seq > d[0].seq);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(a[1]), 0); /* closed */
  CU_ASSERT_EQUAL(taxi_proactor_close(p, b[0]), 0);
  pt_close(&a[1]);
  pt_close(&b[1]);
  pt_destroy(p);
}

/* Another thread cancels many pending reads while this one dispatches:
 * each completes exactly once, with TAXI_ECANCELED. */
enum { CN_MANY = 64 };
typedef struct cn_many {
  taxi_proactor_t *p;
  taxi_op_t ops[CN_MANY];
  pt_done_t d[CN_MANY];
  char buf[CN_MANY][4];
  int sv[CN_MANY][2];
  int rcs[CN_MANY];
} cn_many_t;

static void cn_cancel_all(void *arg) {
  cn_many_t *m = arg;
  for (int i = 0; i < CN_MANY; i++) {
    m->rcs[i] = taxi_proactor_cancel(m->p, &m->ops[i]);
    if (i % 8 == 0) pt_sleep_ms(1);
  }
}

static int cn_all_done(void *arg) {
  cn_many_t *m = arg;
  for (int i = 0; i < CN_MANY; i++)
    if (atomic_load(&m->d[i].calls) == 0) return 0;
  return 1;
}

static void test_cancel_from_other_thread(void) {
  static cn_many_t m;
  memset(&m, 0, sizeof m);
  m.p = pt_proactor();
  for (int i = 0; i < CN_MANY; i++) {
    pt_pair(m.p, m.sv[i]);
    taxi_op_init(&m.ops[i]);
    pt_done_init(&m.d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(m.p, &m.ops[i], m.sv[i][0], m.buf[i], 4, 0,
                           pt_on_done, &m.d[i]),
        0);
  }
  pt_thread_t t;
  pt_thread_start(&t, cn_cancel_all, &m);
  CU_ASSERT(pt_run_until(m.p, cn_all_done, &m, pt_wait_ms()) == 1);
  pt_thread_join(&t, 1, "the cancelling thread");
  pt_settle(m.p, 20);
  for (int i = 0; i < CN_MANY; i++) {
    CU_ASSERT_EQUAL(m.rcs[i], 0);
    CU_ASSERT_EQUAL(atomic_load(&m.d[i].calls), 1);
    CU_ASSERT_EQUAL(m.d[i].status, TAXI_ECANCELED);
    pt_close(&m.sv[i][1]);
  }
  pt_destroy(m.p);
}

/* Destroy with operations in flight (reads, a blocked write, an accept, a
 * timer): every handler runs once with TAXI_ECANCELED in the destroying
 * thread before destroy returns, and the attached handles are closed. */
typedef struct cn_destroy {
  taxi_proactor_t *p;
  pthread_t thread;
  int rc;
  int calls_at_return;
} cn_destroy_t;

enum { CN_D_PAIRS = 4, CN_D_OPS = CN_D_PAIRS + 3 };
static pt_done_t cn_dd[CN_D_OPS];

static int cn_do_destroy(void *arg) {
  cn_destroy_t *x = arg;
  x->thread = pthread_self();
  x->rc = taxi_proactor_destroy(x->p);
  int calls = 0;
  for (int i = 0; i < CN_D_OPS; i++) calls += atomic_load(&cn_dd[i].calls);
  x->calls_at_return = calls;
  return x->rc;
}

static void test_destroy_with_ops_in_flight(void) {
  taxi_proactor_t *p = pt_proactor();
  static taxi_op_t ops[CN_D_OPS];
  static char bufs[CN_D_PAIRS][8];
  int peers[CN_D_PAIRS];
  for (int i = 0; i < CN_D_OPS; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&cn_dd[i]);
  }
  for (int i = 0; i < CN_D_PAIRS; i++) {
    int sv[2];
    pt_pair(p, sv);
    peers[i] = sv[1];
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &ops[i], sv[0], bufs[i], 8, 0,
                                             pt_on_done, &cn_dd[i]),
                          0);
  }
  int lfd = util_tcp_listener(NULL);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(p, &ops[CN_D_PAIRS], lfd, TAXI_ACCEPT_MULTISHOT,
                           pt_on_done, &cn_dd[CN_D_PAIRS]),
      0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_timer(p, &ops[CN_D_PAIRS + 1], 3600 * TAXI_NSEC_PER_SEC,
                          pt_on_done, &cn_dd[CN_D_PAIRS + 1]),
      0);
  int wsv[2];
  pt_pair(p, wsv);
  size_t big = cn_big_size();
  unsigned char *data = calloc(1, big);
  CU_ASSERT_FATAL(data != NULL);
  taxi_buf_t b = {data, big};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &ops[CN_D_PAIRS + 2], wsv[0], &b, 1, pt_on_done,
                          &cn_dd[CN_D_PAIRS + 2]),
      0);
  pt_settle(p, 30);
  for (int i = 0; i < CN_D_OPS; i++)
    CU_ASSERT_EQUAL(atomic_load(&cn_dd[i].calls), 0);

  cn_destroy_t x = {p, pthread_self(), -1, 0};
  pt_bounded(cn_do_destroy, &x, "taxi_proactor_destroy");
  CU_ASSERT_EQUAL(x.rc, 0);
  CU_ASSERT_EQUAL(x.calls_at_return, CN_D_OPS);
  /* The listener is closed: its descriptor names no listening socket any
   * more (closed, or reused by nothing here: this thread opens nothing in
   * between and the proactor's threads are gone).  Not a connect to its
   * port, which another process may have bound meanwhile. */
  int listening = 0;
  socklen_t len = sizeof listening;
  CU_ASSERT(getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, (void *)&listening,
                       &len) != 0 ||
            listening == 0);
  for (int i = 0; i < CN_D_OPS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&cn_dd[i].calls), 1);
    CU_ASSERT_EQUAL(cn_dd[i].status, TAXI_ECANCELED);
    CU_ASSERT(pthread_equal(cn_dd[i].thread, x.thread));
    CU_ASSERT_EQUAL(cn_dd[i].more, 0);
  }
  /* The attached handles were closed: the peers see the end. */
  for (int i = 0; i < CN_D_PAIRS; i++) {
    CU_ASSERT_EQUAL(pt_peer_read_to_eof(peers[i]), 0);
    close(peers[i]);
  }
  CU_ASSERT(pt_peer_read_to_eof(wsv[1]) >= 0);
  close(wsv[1]);
  free(data);
}

static CU_TestInfo cancel_tests[] = {
    {"cancel a pending read: TAXI_ECANCELED once, then TAXI_ENOENT",
     test_cancel_pending_read},
    {"cancel twice before dispatch: one completion", test_cancel_twice},
    {"cancel a record not in flight; bad arguments", test_cancel_not_started},
    {"cancel a pending accept", test_cancel_accept},
    {"cancel a pending multishot accept", test_cancel_multishot_accept},
    {"cancel the middle of a queue: the others keep the stream",
     test_cancel_middle_of_queue},
    {"cancel the head of a queue: the next gets the bytes",
     test_cancel_head_of_queue},
    {"cancel a blocked write: reported bytes are what the peer got",
     test_cancel_write_in_progress},
    {"close with reads and writes queued: each TAXI_ECANCELED once, in order",
     test_close_with_queued_ops},
    {"detach with a read pending: cancelled, handle left open",
     test_detach_with_pending},
    {"close and cancel from a completion handler",
     test_close_and_cancel_from_handler},
    {"cancel from another thread while dispatching",
     test_cancel_from_other_thread},
    {"destroy with operations in flight: TAXI_ECANCELED before it returns",
     test_destroy_with_ops_in_flight},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_cancel = {"cancel", cancel_tests, 120, NULL};
