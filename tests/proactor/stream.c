/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stream.c - accept, connect, read and write on stream
 * sockets: partial transfers (a read-some returns what arrived, an exact
 * read gathers many small segments, a write of several megabytes completes
 * only when every byte is sent, gathering writes with empty buffers), the
 * order of several operations per handle and direction, end of stream,
 * peer reset, and multishot accept.
 *
 * The peer end of each connection is a plain non-blocking descriptor.  When
 * the peer has to act while the proactor runs (a slow writer, a slow
 * reader), it runs in a helper thread and the test thread dispatches.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in st_loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static size_t st_big_size(void) {
  return pt_small() ? (size_t)2 << 20 : (size_t)8 << 20;
}

/* The bytes the kernel may hold between fd and its peer. */
static size_t st_buffered_max(int fd, int peer) {
  int snd = 0, rcv = 0;
  socklen_t l = sizeof snd;
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l);
  l = sizeof rcv;
  getsockopt(peer, SOL_SOCKET, SO_RCVBUF, &rcv, &l);
  return (size_t)(snd > 0 ? snd : 0) + (size_t)(rcv > 0 ? rcv : 0);
}

/* ---- peers in threads ---------------------------------------------------- */

/* Reads `len` bytes from fd and compares them with `expect`, slowly when
 * asked (a short pause every few reads), after `go` is set. */
typedef struct st_reader {
  int fd;
  const unsigned char *expect;
  size_t len;
  size_t chunk;
  int slow;
  atomic_int go;
  atomic_long got; /* bytes read so far */
  long first_bad;  /* index of the first wrong byte, or -1 */
  int failed;      /* error, EOF or time-out before len */
} st_reader_t;

static void st_reader_run(void *arg) {
  st_reader_t *r = arg;
  unsigned char *buf = malloc(r->chunk);
  r->first_bad = -1;
  if (!buf || !util_wait_flag(&r->go, 1, pt_wait_ms())) {
    r->failed = 1;
    free(buf);
    return;
  }
  size_t have = 0;
  unsigned reads = 0;
  while (have < r->len) {
    size_t want = r->len - have < r->chunk ? r->len - have : r->chunk;
    size_t got = 0;
    /* Some: whatever arrives, up to want. */
    ssize_t n = read(r->fd, buf, want);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (pt_peer_read(r->fd, buf, 1, &got) != 0) {
        r->failed = 1;
        break;
      }
      n = 1;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n <= 0) {
      r->failed = 1;
      break;
    }
    long d = pt_diff(buf, r->expect + have, (size_t)n);
    if (d >= 0 && r->first_bad < 0) r->first_bad = (long)have + d;
    have += (size_t)n;
    atomic_store(&r->got, (long)have);
    if (r->slow && ++reads % 8 == 0) pt_sleep_ms(1);
  }
  free(buf);
}

/* Writes `len` bytes of `data` to fd in pieces of 1..max_piece bytes
 * (from `seed`), pausing now and then, so that the other end sees many
 * small segments. */
typedef struct st_writer {
  int fd;
  const unsigned char *data;
  size_t len;
  size_t max_piece;
  uint64_t seed;
  unsigned pause_every; /* pause 1 ms after this many pieces (0: never) */
  int failed;
} st_writer_t;

static void st_writer_run(void *arg) {
  st_writer_t *w = arg;
  uint64_t s = w->seed;
  size_t off = 0;
  unsigned pieces = 0;
  while (off < w->len) {
    size_t n = 1 + (size_t)(pt_rand(&s) % w->max_piece);
    if (n > w->len - off) n = w->len - off;
    if (pt_peer_write(w->fd, w->data + off, n) != 0) {
      w->failed = 1;
      return;
    }
    off += n;
    if (w->pause_every && ++pieces % w->pause_every == 0) pt_sleep_ms(1);
  }
}

/* ---- accept and connect -------------------------------------------------- */

/* A TCP accept and connect through the proactor: both complete with 0, the
 * accepted handle is attached, non-blocking, and carries the peer's
 * address; data then flows both ways. */
static void test_accept_connect(void) {
  taxi_proactor_t *p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CU_ASSERT_FATAL(cfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, cfd), 0);
#if !defined(_WIN32) /* Winsock cannot tell a socket's mode */
  CU_ASSERT(fcntl(cfd, F_GETFL) & O_NONBLOCK); /* attach made it so */
#endif

  taxi_op_t aop, cop;
  taxi_op_init(&aop);
  taxi_op_init(&cop);
  pt_done_t ad, cd;
  pt_done_init(&ad);
  pt_done_init(&cd);
  struct sockaddr_in a = st_loopback(port);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_accept(p, &aop, lfd, 0, pt_on_done, &ad),
                        0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&aop), 1);
  CU_ASSERT_PTR_EQUAL(taxi_op_proactor(&aop), p);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_connect(p, &cop, cfd, &a, sizeof a, pt_on_done, &cd), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &ad, 1));
  CU_ASSERT_FATAL(pt_run_done(p, &cd, 1));

  CU_ASSERT_EQUAL(ad.status, 0);
  CU_ASSERT_EQUAL(ad.kind, TAXI_OP_ACCEPT);
  CU_ASSERT_EQUAL(ad.handle, lfd);
  CU_ASSERT_EQUAL(ad.more, 0);
  CU_ASSERT_EQUAL(ad.in_flight, 0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&aop), 0);
  CU_ASSERT_EQUAL(cd.status, 0);
  CU_ASSERT_EQUAL(cd.kind, TAXI_OP_CONNECT);
  CU_ASSERT_EQUAL(cd.handle, cfd);

  int sfd = aop.accepted;
  CU_ASSERT_FATAL(sfd >= 0);
#if !defined(_WIN32) /* Winsock cannot tell a socket's mode */
  CU_ASSERT(fcntl(sfd, F_GETFL) & O_NONBLOCK);
#endif
  /* Attached already. */
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, sfd), TAXI_EEXIST);
  /* The peer address is the connecting socket's own address. */
  struct sockaddr_in local;
  socklen_t ll = sizeof local;
  CU_ASSERT_EQUAL(getsockname(cfd, (struct sockaddr *)&local, &ll), 0);
  CU_ASSERT(aop.peer_len >= sizeof(struct sockaddr_in));
  CU_ASSERT(aop.peer_len <= sizeof aop.peer);
  struct sockaddr_in peer;
  memcpy(&peer, aop.peer, sizeof peer);
  CU_ASSERT_EQUAL(peer.sin_family, AF_INET);
  CU_ASSERT_EQUAL(peer.sin_port, local.sin_port);
  CU_ASSERT_EQUAL(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));

  /* Both ways through the proactor. */
  char out1[] = "hello from the client", in1[sizeof out1];
  char out2[] = "and the server answers", in2[sizeof out2];
  taxi_buf_t b1 = {out1, sizeof out1}, b2 = {out2, sizeof out2};
  taxi_op_t r1, w1, r2, w2;
  taxi_op_init(&r1);
  taxi_op_init(&w1);
  taxi_op_init(&r2);
  taxi_op_init(&w2);
  pt_done_t dr1, dw1, dr2, dw2;
  pt_done_init(&dr1);
  pt_done_init(&dw1);
  pt_done_init(&dr2);
  pt_done_init(&dw2);
  CU_ASSERT_EQUAL(taxi_proactor_read(p, &r1, sfd, in1, sizeof in1,
                                     TAXI_READ_EXACT, pt_on_done, &dr1),
                  0);
  CU_ASSERT_EQUAL(taxi_proactor_read(p, &r2, cfd, in2, sizeof in2,
                                     TAXI_READ_EXACT, pt_on_done, &dr2),
                  0);
  CU_ASSERT_EQUAL(taxi_proactor_write(p, &w1, cfd, &b1, 1, pt_on_done, &dw1),
                  0);
  CU_ASSERT_EQUAL(taxi_proactor_write(p, &w2, sfd, &b2, 1, pt_on_done, &dw2),
                  0);
  CU_ASSERT(pt_run_done(p, &dr1, 1));
  CU_ASSERT(pt_run_done(p, &dr2, 1));
  CU_ASSERT(pt_run_done(p, &dw1, 1));
  CU_ASSERT(pt_run_done(p, &dw2, 1));
  CU_ASSERT_EQUAL(dr1.status, 0);
  CU_ASSERT_EQUAL(dr1.bytes, sizeof out1);
  CU_ASSERT_EQUAL(dr1.kind, TAXI_OP_READ);
  CU_ASSERT_EQUAL(dw1.status, 0);
  CU_ASSERT_EQUAL(dw1.bytes, sizeof out1);
  CU_ASSERT_EQUAL(dw1.kind, TAXI_OP_WRITE);
  CU_ASSERT_EQUAL(dr2.bytes, sizeof out2);
  CU_ASSERT_EQUAL(dw2.bytes, sizeof out2);
  CU_ASSERT_EQUAL(memcmp(in1, out1, sizeof out1), 0);
  CU_ASSERT_EQUAL(memcmp(in2, out2, sizeof out2), 0);

  CU_ASSERT_EQUAL(taxi_proactor_close(p, sfd), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, cfd), 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&ad.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&cd.calls), 1);
  pt_destroy(p);
}

/* A port nobody listens on refuses: TAXI_ECONNREFUSED. */
static void test_connect_refused(void) {
  taxi_proactor_t *p = pt_proactor();
  /* A port that was just free: bound, never listened on, closed. */
  int tmp = socket(AF_INET, SOCK_STREAM, 0);
  CU_ASSERT_FATAL(tmp >= 0);
  struct sockaddr_in a = st_loopback(0);
  socklen_t al = sizeof a;
  CU_ASSERT_FATAL(bind(tmp, (struct sockaddr *)&a, sizeof a) == 0);
  CU_ASSERT_FATAL(getsockname(tmp, (struct sockaddr *)&a, &al) == 0);
  int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CU_ASSERT_FATAL(cfd >= 0);
  close(tmp);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, cfd), 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_connect(p, &op, cfd, &a, sizeof a, pt_on_done, &d), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_ECONNREFUSED);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_CONNECT);
  if (d.status != TAXI_ECONNREFUSED)
    printf("\n    connect status %d (%s)\n", d.status,
           taxi_error_name(d.status));
  CU_ASSERT_EQUAL(taxi_proactor_close(p, cfd), 0);
  pt_destroy(p);
}

/* Multishot accept: one completion per connection with op->more set while
 * the record stays in flight, distinct attached handles, and a last
 * completion without `more` (TAXI_ECANCELED) after cancel. */
#define MS_CONNS 5
typedef struct st_multi {
  atomic_int calls;
  atomic_int more_calls;
  int accepted[MS_CONNS + 4];
  int in_flight[MS_CONNS + 4];
  int status[MS_CONNS + 4];
  int more[MS_CONNS + 4];
} st_multi_t;

static void st_on_multi(taxi_op_t *op, int status, size_t bytes, void *act) {
  st_multi_t *m = act;
  (void)bytes;
  int i = atomic_load(&m->calls);
  if (i < MS_CONNS + 4) {
    m->accepted[i] = op->more || status == 0 ? op->accepted : -1;
    m->in_flight[i] = taxi_op_in_flight(op);
    m->status[i] = status;
    m->more[i] = op->more;
  }
  if (op->more) atomic_fetch_add(&m->more_calls, 1);
  atomic_fetch_add(&m->calls, 1);
}

static void test_accept_multishot(void) {
  taxi_proactor_t *p = pt_proactor();
  int port = 0;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, lfd), 0);
  static st_multi_t m;
  memset(&m, 0, sizeof m);
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(p, &op, lfd, TAXI_ACCEPT_MULTISHOT, st_on_multi, &m),
      0);
  int clients[MS_CONNS];
  struct sockaddr_in a = st_loopback(port);
  for (int i = 0; i < MS_CONNS; i++) {
    clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CU_ASSERT_FATAL(clients[i] >= 0);
    CU_ASSERT_FATAL(connect(clients[i], (struct sockaddr *)&a, sizeof a) == 0);
  }
  CU_ASSERT_FATAL(pt_run_count(p, &m.calls, MS_CONNS));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&m.calls), MS_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&m.more_calls), MS_CONNS);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 1);
  for (int i = 0; i < MS_CONNS; i++) {
    CU_ASSERT_EQUAL(m.status[i], 0);
    CU_ASSERT_EQUAL(m.more[i], 1);
    CU_ASSERT_EQUAL(m.in_flight[i], 1);
    CU_ASSERT(m.accepted[i] >= 0);
    for (int j = 0; j < i; j++) CU_ASSERT(m.accepted[i] != m.accepted[j]);
    if (m.accepted[i] >= 0)
      CU_ASSERT_EQUAL(taxi_proactor_attach(p, m.accepted[i]), TAXI_EEXIST);
  }
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), 0);
  CU_ASSERT_FATAL(pt_run_count(p, &m.calls, MS_CONNS + 1));
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&m.calls), MS_CONNS + 1);
  CU_ASSERT_EQUAL(m.status[MS_CONNS], TAXI_ECANCELED);
  CU_ASSERT_EQUAL(m.more[MS_CONNS], 0);
  CU_ASSERT_EQUAL(m.in_flight[MS_CONNS], 0);
  CU_ASSERT_EQUAL(taxi_op_in_flight(&op), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(p, &op), TAXI_ENOENT);
  /* The record is idle again: a plain accept with it works. */
  int extra = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CU_ASSERT_FATAL(extra >= 0);
  CU_ASSERT_FATAL(connect(extra, (struct sockaddr *)&a, sizeof a) == 0);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_accept(p, &op, lfd, 0, pt_on_done, &d),
                        0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.more, 0);
  if (d.status == 0) taxi_proactor_close(p, d.accepted);
  for (int i = 0; i < MS_CONNS; i++) {
    if (m.accepted[i] >= 0)
      CU_ASSERT_EQUAL(taxi_proactor_close(p, m.accepted[i]), 0);
    close(clients[i]);
  }
  close(extra);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, lfd), 0);
  pt_destroy(p);
}

/* ---- reads --------------------------------------------------------------- */

/* A read without TAXI_READ_EXACT completes with what arrived (fewer bytes
 * than asked), and the following reads get the rest, in order. */
static void test_read_some_returns_what_arrived(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  unsigned char msg[10], got[4096];
  pt_fill(msg, sizeof msg, 1);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], got, sizeof got, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(pt_settle(p, 20), 0); /* nothing arrived: no completion */
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_READ);
  CU_ASSERT_EQUAL(d.handle, sv[0]);
  CU_ASSERT(d.bytes >= 1 && d.bytes <= sizeof msg);
  size_t have = d.bytes <= sizeof msg ? d.bytes : 0;
  CU_ASSERT_EQUAL(memcmp(got, msg, have), 0);
  /* The rest, if the first read did not take all of it. */
  int rounds = 0;
  while (have < sizeof msg && rounds++ < 20) {
    pt_done_init(&d);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &op, sv[0], got + have, sizeof got - have, 0,
                           pt_on_done, &d),
        0);
    CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
    CU_ASSERT_EQUAL_FATAL(d.status, 0);
    CU_ASSERT_FATAL(d.bytes >= 1 && have + d.bytes <= sizeof msg);
    have += d.bytes;
  }
  CU_ASSERT_EQUAL(have, sizeof msg);
  CU_ASSERT_EQUAL(memcmp(got, msg, sizeof msg), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A peer writing a message in many small pieces with pauses: repeated
 * read-some operations each complete with some bytes, and together they
 * make up the message. */
static void test_read_some_pieces(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { LEN = 20000 };
  static unsigned char msg[LEN], got[LEN];
  pt_fill(msg, LEN, 2);
  memset(got, 0, LEN);
  st_writer_t w = {sv[1], msg, LEN, 300, 7, 4, 0};
  pt_thread_t t;
  pt_thread_start(&t, st_writer_run, &w);
  taxi_op_t op;
  taxi_op_init(&op);
  size_t have = 0;
  int reads = 0, bad = 0;
  while (have < LEN && !bad) {
    pt_done_t d;
    pt_done_init(&d);
    size_t want = LEN - have < 1000 ? LEN - have : 1000;
    if (taxi_proactor_read(p, &op, sv[0], got + have, want, 0, pt_on_done,
                           &d) != 0 ||
        !pt_run_done(p, &d, 1) || d.status != 0 || d.bytes == 0 ||
        d.bytes > want) {
      printf("\n    read %d: status %d bytes %zu\n", reads, d.status, d.bytes);
      bad = 1;
      break;
    }
    have += d.bytes;
    reads++;
  }
  pt_thread_join(&t, 2, "the writer thread");
  CU_ASSERT_FALSE(bad);
  CU_ASSERT_FALSE(w.failed);
  CU_ASSERT_EQUAL(have, LEN);
  CU_ASSERT_EQUAL(pt_diff(got, msg, LEN), -1);
  CU_ASSERT(reads >= LEN / 1000);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* One exact read gathers a message the peer sends in `max_piece`-byte (or
 * smaller, random) pieces: exactly one completion, with every byte. */
static void st_exact_read(size_t len, size_t max_piece, unsigned pause_every,
                          int tcp) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  if (tcp)
    pt_tcp_pair(p, sv);
  else
    pt_pair(p, sv);
  unsigned char *msg = malloc(len), *got = calloc(1, len);
  CU_ASSERT_FATAL(msg && got);
  pt_fill(msg, len, len);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], got, len,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  st_writer_t w = {sv[1], msg, len, max_piece, len * 31, pause_every, 0};
  pt_thread_t t;
  pt_thread_start(&t, st_writer_run, &w);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 2, "the writer thread");
  pt_settle(p, 10);
  CU_ASSERT_FALSE(w.failed);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, len);
  CU_ASSERT_EQUAL(pt_diff(got, msg, len), -1);
  free(msg);
  free(got);
  pt_close(&sv[1]);
  pt_destroy(p);
}

static void test_read_exact_byte_at_a_time(void) {
  st_exact_read(512, 1, 16, 0);
}

static void test_read_exact_random_segments(void) {
  st_exact_read(pt_small() ? 64 * 1024 : 256 * 1024, 1500, 8, 0);
}

static void test_read_exact_random_segments_tcp(void) {
  st_exact_read(pt_small() ? 64 * 1024 : 256 * 1024, 3000, 8, 1);
}

/* Several exact reads queued on one socket complete in the order they were
 * started, each with its slice of the stream. */
static void test_reads_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 8, SZ = 1000 };
  static unsigned char msg[N * SZ], got[N][SZ];
  pt_fill(msg, sizeof msg, 3);
  memset(got, 0, sizeof got);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &ops[i], sv[0], got[i], SZ, TAXI_READ_EXACT,
                           pt_on_done, &d[i]),
        0);
  }
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT(pt_run_done(p, &d[N - 1], 1));
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, 0);
    CU_ASSERT_EQUAL(d[i].bytes, SZ);
    CU_ASSERT_EQUAL(memcmp(got[i], msg + i * SZ, SZ), 0);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
  }
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Read-some operations queued on one socket: in completion order their
 * bytes are the stream, in order; those left when the peer closes end with
 * TAXI_EEOF. */
static void test_read_some_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 8, SZ = 64, LEN = 300 };
  static unsigned char msg[LEN], got[N][SZ];
  pt_fill(msg, sizeof msg, 4);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_read(p, &ops[i], sv[0], got[i], SZ, 0, pt_on_done, &d[i]),
        0);
  }
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, 150), 0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg + 150, LEN - 150), 0);
  shutdown(sv[1], SHUT_WR);
  for (int i = 0; i < N; i++) CU_ASSERT(pt_run_done(p, &d[i], 1));
  size_t have = 0;
  int eof_seen = 0;
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
    if (d[i].status == 0) {
      CU_ASSERT_FALSE(eof_seen); /* no data after end of stream */
      CU_ASSERT(d[i].bytes >= 1 && d[i].bytes <= SZ &&
                have + d[i].bytes <= LEN);
      if (d[i].bytes <= SZ && have + d[i].bytes <= LEN) {
        CU_ASSERT_EQUAL(memcmp(got[i], msg + have, d[i].bytes), 0);
        have += d[i].bytes;
      }
    } else {
      CU_ASSERT_EQUAL(d[i].status, TAXI_EEOF);
      CU_ASSERT_EQUAL(d[i].bytes, 0);
      eof_seen = 1;
    }
  }
  /* 8 x 64 > 300, so the stream ends before the reads do. */
  CU_ASSERT_EQUAL(have, LEN);
  CU_ASSERT(eof_seen);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A read pending on a socket does not hold up a write on it: the two
 * directions are independent. */
static void test_read_pending_write_proceeds(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char in[16], out[] = "full duplex", peer[sizeof out];
  taxi_op_t r, w;
  taxi_op_init(&r);
  taxi_op_init(&w);
  pt_done_t dr, dw;
  pt_done_init(&dr);
  pt_done_init(&dw);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &r, sv[0], in, sizeof in,
                                           TAXI_READ_EXACT, pt_on_done, &dr),
                        0);
  taxi_buf_t b = {out, sizeof out};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &w, sv[0], &b, 1, pt_on_done, &dw), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &dw, 1));
  CU_ASSERT_EQUAL(dw.status, 0);
  CU_ASSERT_EQUAL(dw.bytes, sizeof out);
  CU_ASSERT_EQUAL(atomic_load(&dr.calls), 0);
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], peer, sizeof peer, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(peer, out, sizeof out), 0);
  char msg[16];
  pt_fill(msg, sizeof msg, 5);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 1));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, sizeof in);
  CU_ASSERT_EQUAL(memcmp(in, msg, sizeof msg), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* A handler may start the next operation with the record it was given:
 * a chain of 200 reads, each started from the previous one's handler. */
typedef struct st_chain {
  taxi_proactor_t *p;
  int fd;
  unsigned char buf[64];
  size_t total;
  atomic_int reads;
  atomic_int done;
  int status;
} st_chain_t;

static void st_on_chain(taxi_op_t *op, int status, size_t bytes, void *act) {
  st_chain_t *c = act;
  if (status != 0) {
    c->status = status;
    atomic_store(&c->done, 1);
    return;
  }
  c->total += bytes;
  atomic_fetch_add(&c->reads, 1);
  if (taxi_op_in_flight(op) ||
      taxi_proactor_read(c->p, op, c->fd, c->buf, 1, 0, st_on_chain, c) != 0) {
    c->status = -1000;
    atomic_store(&c->done, 1);
  }
}

static void test_handler_restarts_record(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  static st_chain_t c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.fd = sv[0];
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], c.buf, 1, 0, st_on_chain, &c), 0);
  static unsigned char msg[200];
  pt_fill(msg, sizeof msg, 6);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  CU_ASSERT(pt_run_count(p, &c.reads, 200));
  CU_ASSERT_EQUAL(c.total, 200);
  CU_ASSERT_EQUAL(atomic_load(&c.done), 0);
  pt_close(&sv[1]); /* the 201st read ends with EOF */
  CU_ASSERT(pt_run_count(p, &c.done, 1));
  CU_ASSERT_EQUAL(c.status, TAXI_EEOF);
  pt_destroy(p);
}

/* ---- writes -------------------------------------------------------------- */

/* A write of several megabytes - far more than the socket buffers hold -
 * completes only when every byte is sent: not while the peer reads
 * nothing, and once, with every byte, while the peer drains slowly. */
static void st_big_write(int tcp) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  if (tcp)
    pt_tcp_pair(p, sv);
  else
    pt_pair(p, sv);
  size_t len = st_big_size();
  unsigned char *data = malloc(len);
  CU_ASSERT_FATAL(data != NULL);
  pt_fill(data, len, 8);
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = data;
  r.len = len;
  r.chunk = 32768;
  r.slow = 1;
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);

  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {data, len};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  /* The peer reads nothing yet: the write cannot have finished. */
  size_t buffered = st_buffered_max(sv[0], sv[1]);
  pt_settle(p, 50);
#if defined(_WIN32)
  tcp = 1; /* util_socketpair is loopback TCP there: buffering unbounded */
#endif
  if (!tcp && buffered * 4 < len) {
    CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  }
  atomic_store(&r.go, 1);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 3, "the slow reader");
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 1);
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, len);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_WRITE);
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), len);
  CU_ASSERT_EQUAL(r.first_bad, -1);
  if (r.first_bad >= 0) printf("\n    first wrong byte at %ld\n", r.first_bad);
  free(data);
  pt_close(&sv[1]);
  pt_destroy(p);
}

static void test_big_write(void) { st_big_write(0); }
static void test_big_write_tcp(void) { st_big_write(1); }

/* A gathering write of TAXI_OP_MAX_BUFS buffers, empty ones among them (at
 * the start, in the middle, at the end), larger than the socket buffers so
 * that partial writes stop inside buffers and at their edges: the peer
 * gets the concatenation. */
static void test_gather_write_with_empty_buffers(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  static const size_t sizes[TAXI_OP_MAX_BUFS] = {0, 3, 0,      200000,
                                                 0, 1, 300000, 0};
  size_t total = 0;
  for (int i = 0; i < TAXI_OP_MAX_BUFS; i++) total += sizes[i];
  unsigned char *all = malloc(total);
  CU_ASSERT_FATAL(all != NULL);
  pt_fill(all, total, 9);
  static char empty[1];
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  size_t off = 0;
  for (int i = 0; i < TAXI_OP_MAX_BUFS; i++) {
    bufs[i].base = sizes[i] ? (void *)(all + off) : (void *)empty;
    bufs[i].len = sizes[i];
    off += sizes[i];
  }
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = all;
  r.len = total;
  r.chunk = 7000;
  r.slow = 1;
  atomic_store(&r.go, 1);
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_write(p, &op, sv[0], bufs,
                                            TAXI_OP_MAX_BUFS, pt_on_done, &d),
                        0);
  /* The array of taxi_buf_t is copied: scribbling on it changes nothing. */
  memset(bufs, 0, sizeof bufs);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_thread_join(&t, 2, "the reader thread");
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, total);
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), total);
  CU_ASSERT_EQUAL(r.first_bad, -1);

  /* A small one, all of it at once: "ab" "" "" "cde". */
  char a[] = "ab", c[] = "cde", got[5];
  taxi_buf_t small[4] = {{a, 2}, {empty, 0}, {empty, 0}, {c, 3}};
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], small, 4, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(d.bytes, 5);
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], got, 5, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(got, "abcde", 5), 0);
  free(all);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* Writes queued on one socket, more than the socket buffers hold in all:
 * the peer receives them in the order they were started, and they complete
 * in that order, each with its whole length. */
static void test_writes_in_issue_order(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  enum { N = 16 };
  size_t sizes[N], total = 0;
  uint64_t s = 10;
  for (int i = 0; i < N; i++) {
    sizes[i] = 1 + (size_t)(pt_rand(&s) % (pt_small() ? 60000 : 200000));
    total += sizes[i];
  }
  unsigned char *all = malloc(total);
  CU_ASSERT_FATAL(all != NULL);
  pt_fill(all, total, 11);
  static st_reader_t r;
  memset(&r, 0, sizeof r);
  r.fd = sv[1];
  r.expect = all;
  r.len = total;
  r.chunk = 16384;
  r.slow = 1;
  pt_thread_t t;
  pt_thread_start(&t, st_reader_run, &r);
  static taxi_op_t ops[N];
  static pt_done_t d[N];
  taxi_buf_t b;
  size_t off = 0;
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    b.base = all + off;
    b.len = sizes[i];
    off += sizes[i];
    CU_ASSERT_EQUAL_FATAL(
        taxi_proactor_write(p, &ops[i], sv[0], &b, 1, pt_on_done, &d[i]), 0);
  }
  atomic_store(&r.go, 1);
  CU_ASSERT(pt_run_done(p, &d[N - 1], 1));
  pt_thread_join(&t, 3, "the reader thread");
  pt_settle(p, 10);
  for (int i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    CU_ASSERT_EQUAL(d[i].status, 0);
    CU_ASSERT_EQUAL(d[i].bytes, sizes[i]);
    if (i > 0) CU_ASSERT(d[i].seq > d[i - 1].seq);
  }
  CU_ASSERT_FALSE(r.failed);
  CU_ASSERT_EQUAL((size_t)atomic_load(&r.got), total);
  CU_ASSERT_EQUAL(r.first_bad, -1);
  free(all);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* ---- end of stream, reset ------------------------------------------------ */

/* The peer shuts its sending side: a read-some ends with TAXI_EEOF and 0
 * bytes; writing the other way still works. */
static void test_eof_read_some(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  char buf[32];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(shutdown(sv[1], SHUT_WR), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_EEOF);
  CU_ASSERT_EQUAL(d.bytes, 0);
  CU_ASSERT_EQUAL(d.kind, TAXI_OP_READ);
  /* Reading again: still the end. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, pt_on_done, &d), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_EEOF);
  CU_ASSERT_EQUAL(d.bytes, 0);
  /* Half-closed: the other direction still carries data. */
  char out[] = "still open";
  taxi_buf_t b = {out, sizeof out};
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(pt_peer_read(sv[1], buf, sizeof out, NULL), 0);
  CU_ASSERT_EQUAL(memcmp(buf, out, sizeof out), 0);
  pt_close(&sv[1]);
  pt_destroy(p);
}

/* An exact read cut short by the peer closing reports TAXI_EEOF with the
 * bytes it got; a read queued behind it gets TAXI_EEOF and 0 bytes. */
static void test_eof_cuts_exact_read(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  unsigned char msg[5], buf[10], buf2[4];
  pt_fill(msg, sizeof msg, 12);
  memset(buf, 0, sizeof buf);
  taxi_op_t op, op2;
  taxi_op_init(&op);
  taxi_op_init(&op2);
  pt_done_t d, d2;
  pt_done_init(&d);
  pt_done_init(&d2);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op2, sv[0], buf2, sizeof buf2,
                                           TAXI_READ_EXACT, pt_on_done, &d2),
                        0);
  CU_ASSERT_EQUAL_FATAL(pt_peer_write(sv[1], msg, sizeof msg), 0);
  pt_settle(p, 20);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0); /* 5 of 10: not done yet */
  pt_close(&sv[1]);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_FATAL(pt_run_done(p, &d2, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_EEOF);
  CU_ASSERT_EQUAL(d.bytes, sizeof msg);
  CU_ASSERT_EQUAL(memcmp(buf, msg, sizeof msg), 0);
  CU_ASSERT_EQUAL(d2.status, TAXI_EEOF);
  CU_ASSERT_EQUAL(d2.bytes, 0);
  CU_ASSERT(d2.seq > d.seq);
  pt_destroy(p);
}

/* Wait until the reset has arrived on fd (it reports an error). */
static void st_wait_reset(int fd) {
  struct pollfd pf = {fd, POLLIN, 0};
  int rc;
  do rc = poll(&pf, 1, pt_wait_ms());
  while (rc < 0 && errno == EINTR);
  CU_ASSERT(rc == 1 && (pf.revents & (POLLERR | POLLHUP)));
}

/* The peer closes with SO_LINGER 0 (a reset) while a read is pending:
 * TAXI_ECONNRESET. */
static void test_reset_on_read(void) {
  if (util_under_wine() && pt_backend_is("emulated")) {
    /* Under wine 8.0, recv() after select() saw a reset arrive returns
     * 0 (end of stream), not WSAECONNRESET; the iocp backend, and the
     * reactor suite's reset test, see the reset. */
    printf("(not run under wine: recv reports the reset as end of stream) ");
    return;
  }
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_tcp_pair(p, sv);
  char buf[64];
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &op, sv[0], buf, sizeof buf,
                                           TAXI_READ_EXACT, pt_on_done, &d),
                        0);
  pt_settle(p, 10);
  pt_close_reset(sv[1]);
  CU_ASSERT_FATAL(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_ECONNRESET);
  if (d.status != TAXI_ECONNRESET)
    printf("\n    read status %d (%s)\n", d.status, taxi_error_name(d.status));
  CU_ASSERT_EQUAL(d.bytes, 0);
  pt_destroy(p);
}

/* A write to a connection the peer reset: TAXI_ECONNRESET (the pending
 * socket error), and no SIGPIPE. */
static void test_reset_on_write(void) {
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_tcp_pair(p, sv);
  pt_close_reset(sv[1]);
  st_wait_reset(sv[0]);
  size_t len = 256 * 1024;
  unsigned char *data = malloc(len);
  CU_ASSERT_FATAL(data != NULL);
  pt_fill(data, len, 13);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {data, len};
  void (*old)(int) = signal(SIGPIPE, SIG_DFL);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  signal(SIGPIPE, old);
  CU_ASSERT_EQUAL(d.status, TAXI_ECONNRESET);
  if (d.status != TAXI_ECONNRESET)
    printf("\n    write status %d (%s)\n", d.status, taxi_error_name(d.status));
  CU_ASSERT(d.bytes < len);
  free(data);
  pt_destroy(p);
}

/* A write to a socket whose peer is closed fails with TAXI_EPIPE and does
 * not raise SIGPIPE (the default action, restored for this test, would end
 * the process). */
static void test_write_peer_closed(void) {
#if defined(_WIN32)
  /* The pairs are loopback TCP there: the first write after the peer's
   * close is accepted (as on any TCP socket); the reset that follows is
   * what "peer reset: write gets TAXI_ECONNRESET" checks. */
  printf("(not applicable: no socketpair on Windows) ");
  return;
#endif
  taxi_proactor_t *p = pt_proactor();
  int sv[2];
  pt_pair(p, sv);
  pt_close(&sv[1]);
  char out[100];
  pt_fill(out, sizeof out, 14);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  taxi_buf_t b = {out, sizeof out};
  void (*old)(int) = signal(SIGPIPE, SIG_DFL);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(p, &op, sv[0], &b, 1, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  signal(SIGPIPE, old);
  CU_ASSERT_EQUAL(d.status, TAXI_EPIPE);
  if (d.status != TAXI_EPIPE)
    printf("\n    write status %d (%s)\n", d.status, taxi_error_name(d.status));
  CU_ASSERT_EQUAL(d.bytes, 0);
  pt_destroy(p);
}

static CU_TestInfo stream_tests[] = {
    {"accept and connect: peer address, attached, data both ways",
     test_accept_connect},
    {"connect to a closed port: TAXI_ECONNREFUSED", test_connect_refused},
    {"multishot accept: one completion per connection, then cancel",
     test_accept_multishot},
    {"read-some completes with what arrived",
     test_read_some_returns_what_arrived},
    {"read-some: many small pieces with pauses", test_read_some_pieces},
    {"exact read: peer sends 1 byte at a time", test_read_exact_byte_at_a_time},
    {"exact read: random segments (unix)", test_read_exact_random_segments},
    {"exact read: random segments (tcp)", test_read_exact_random_segments_tcp},
    {"exact reads queued: issue order, bytes in order",
     test_reads_in_issue_order},
    {"read-some queued: issue order, then EOF", test_read_some_in_issue_order},
    {"pending read does not block a write", test_read_pending_write_proceeds},
    {"handler restarts its record: chain of reads",
     test_handler_restarts_record},
    {"big write completes only when all is sent (unix)", test_big_write},
    {"big write completes only when all is sent (tcp)", test_big_write_tcp},
    {"gathering write with empty buffers",
     test_gather_write_with_empty_buffers},
    {"writes queued: issue order, bytes in order", test_writes_in_issue_order},
    {"EOF: read-some gets TAXI_EEOF, half-close", test_eof_read_some},
    {"EOF cuts an exact read short: TAXI_EEOF + bytes",
     test_eof_cuts_exact_read},
    {"peer reset: read gets TAXI_ECONNRESET", test_reset_on_read},
    {"peer reset: write gets TAXI_ECONNRESET", test_reset_on_write},
    {"peer closed: write gets TAXI_EPIPE, no SIGPIPE", test_write_peer_closed},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_stream = {"stream", stream_tests, 180, NULL};
