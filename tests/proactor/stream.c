/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/stream.c - accept, connect, read and write on stream
 * sockets: accept and connect, multishot accept; and the suite, with the
 * tests of stream_read.c (partial transfers: a read-some returns what
 * arrived, an exact read gathers many small segments), stream_write.c (a
 * write of several megabytes completes only when every byte is sent,
 * gathering writes with empty buffers, the order of several operations per
 * handle and direction) and stream_eof.c (end of stream, peer reset).
 *
 * The peer end of each connection is a plain non-blocking descriptor.  When
 * the peer has to act while the proactor runs (a slow writer, a slow
 * reader), it runs in a helper thread and the test thread dispatches.
 */
#define _GNU_SOURCE 1

#include "stream_helpers.h"

static struct sockaddr_in st_loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
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
