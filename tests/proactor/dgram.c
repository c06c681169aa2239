/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/dgram.c - datagrams through the Proactor
 * (taxi_proactor_recvfrom, taxi_proactor_sendto) on the backend under
 * test: the sender's address, every byte, an empty datagram, truncation
 * reported, a send to an address and to the connected peer, the ICMP port
 * unreachable of a connected socket, receives cancelled by a close (each
 * completed once, and the descriptor's next owner gets its own
 * datagrams), bad input.
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "net_helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A UDP socket bound to 127.0.0.1 on a free port, its address in *a. */
static int dg_udp(struct sockaddr_in *a) {
  int fd = (int)socket(AF_INET, SOCK_DGRAM, 0);
  CU_ASSERT_FATAL(fd >= 0);
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)a, sizeof *a) == 0);
  socklen_t len = sizeof *a;
  CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)a, &len) == 0);
  return fd;
}

/* A plain receive on a socket not attached, bounded. */
static long dg_plain_recv(int fd, void *buf, size_t len) {
  util_set_nonblock(fd);
  for (int i = 0; i < pt_wait_ms(); i++) {
    long n = (long)recv(fd, buf, len, 0);
    if (n >= 0) return n;
    util_sleep_ms(1);
  }
  return -1;
}

/* sendto for a buffer of any type (Winsock's takes a char pointer). */
static long dg_send(int fd, const void *buf, size_t len,
                    const struct sockaddr_in *to) {
  return (long)sendto(fd, (const char *)buf, len, 0,
                      (const struct sockaddr *)to, sizeof *to);
}

static unsigned char dg_byte(unsigned seq, size_t i) {
  return (unsigned char)(seq * 131u + i * 7u + (i >> 8));
}

static void test_recv_send(void) {
  taxi_proactor_t *p = pt_proactor();
  struct sockaddr_in aa, ba;
  int a = dg_udp(&aa), b = dg_udp(&ba);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, a), 0);
  static unsigned char in[70000], out[65507];

  /* A send to an address: every byte arrives, from a's port. */
  for (size_t i = 0; i < sizeof out; i++) out[i] = dg_byte(1, i);
  taxi_op_t s = TAXI_OP_INIT, r = TAXI_OP_INIT;
  pt_done_t ds, dr;
  pt_done_init(&ds);
  pt_done_init(&dr);
  CU_ASSERT_EQUAL(taxi_proactor_sendto(p, &s, a, out, sizeof out, &ba,
                                       sizeof ba, pt_on_done, &ds),
                  0);
  CU_ASSERT_FATAL(pt_run_done(p, &ds, 1));
  CU_ASSERT_EQUAL(ds.status, 0);
  CU_ASSERT_EQUAL(ds.bytes, sizeof out);
  CU_ASSERT_EQUAL(ds.kind, TAXI_OP_SENDTO);
  CU_ASSERT_EQUAL(dg_plain_recv(b, in, sizeof in), (long)sizeof out);
  CU_ASSERT_EQUAL(memcmp(in, out, sizeof out), 0);

  /* A receive: the bytes, the sender's address, no flag. */
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &r, a, in, sizeof in, pt_on_done, &dr), 0);
  for (size_t i = 0; i < 1000; i++) out[i] = dg_byte(2, i);
  CU_ASSERT_EQUAL(dg_send(b, out, 1000, &aa), 1000);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 1));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, 1000);
  CU_ASSERT_EQUAL(dr.kind, TAXI_OP_RECVFROM);
  CU_ASSERT_EQUAL(memcmp(in, out, 1000), 0);
  CU_ASSERT_EQUAL(r.msg_flags, 0);
  CU_ASSERT_EQUAL(r.peer_len, sizeof(struct sockaddr_in));
  struct sockaddr_in from;
  memcpy(&from, r.peer, sizeof from);
  CU_ASSERT_EQUAL(from.sin_port, ba.sin_port);
  CU_ASSERT_EQUAL(from.sin_addr.s_addr, htonl(INADDR_LOOPBACK));

  /* An empty datagram is a datagram, not an end of stream. */
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &r, a, in, sizeof in, pt_on_done, &dr), 0);
  CU_ASSERT_EQUAL(dg_send(b, out, 0, &aa), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 2));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, 0);

  /* Longer than the buffer: its start, and the flag. */
  CU_ASSERT_EQUAL(taxi_proactor_recvfrom(p, &r, a, in, 100, pt_on_done, &dr),
                  0);
  for (size_t i = 0; i < 300; i++) out[i] = dg_byte(3, i);
  CU_ASSERT_EQUAL(dg_send(b, out, 300, &aa), 300);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 3));
  CU_ASSERT_EQUAL(dr.status, 0);
  CU_ASSERT_EQUAL(dr.bytes, 100);
  CU_ASSERT_EQUAL(r.msg_flags, TAXI_MSG_TRUNCATED);
  CU_ASSERT_EQUAL(memcmp(in, out, 100), 0);
  /* One that fits exactly is not flagged. */
  CU_ASSERT_EQUAL(taxi_proactor_recvfrom(p, &r, a, in, 100, pt_on_done, &dr),
                  0);
  CU_ASSERT_EQUAL(dg_send(b, out, 100, &aa), 100);
  CU_ASSERT_FATAL(pt_run_done(p, &dr, 4));
  CU_ASSERT_EQUAL(dr.bytes, 100);
  CU_ASSERT_EQUAL(r.msg_flags, 0);

  CU_ASSERT_EQUAL(taxi_proactor_close(p, a), 0);
  close(b);
  pt_destroy(p);
}

/* Connected: a send without an address goes to the peer; once a datagram
 * found no socket there, the ICMP port unreachable completes the receive
 * in flight (or a later send) with TAXI_ECONNREFUSED. */
static void test_connected_refused(void) {
  if (util_under_wine() && !pt_backend_is("iocp")) {
    /* Wine's recv, send and select never surface a datagram socket's
     * port unreachable (recv: WSAEWOULDBLOCK, select: not readable);
     * only an overlapped receive gets it, which the iocp run checks. */
    printf(
        "not run under wine: its non-overlapped calls never report an "
        "ICMP port unreachable\n");
    return;
  }
  taxi_proactor_t *p = pt_proactor();
  struct sockaddr_in aa, ba, ca;
  int a = dg_udp(&aa), b = dg_udp(&ba);
  CU_ASSERT_EQUAL_FATAL(connect(a, (struct sockaddr *)&ba, sizeof ba), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, a), 0);
  taxi_op_t s = TAXI_OP_INIT, r = TAXI_OP_INIT;
  pt_done_t ds, dr;
  pt_done_init(&ds);
  pt_done_init(&dr);
  CU_ASSERT_EQUAL(
      taxi_proactor_sendto(p, &s, a, "peer", 4, NULL, 0, pt_on_done, &ds), 0);
  CU_ASSERT_FATAL(pt_run_done(p, &ds, 1));
  CU_ASSERT_EQUAL(ds.status, 0);
  CU_ASSERT_EQUAL(ds.bytes, 4);
  char in[16];
  CU_ASSERT_EQUAL(dg_plain_recv(b, in, sizeof in), 4);
  CU_ASSERT_EQUAL(memcmp(in, "peer", 4), 0);

  /* Now to a port nobody has. */
  memset(&ca, 0, sizeof ca);
  ca.sin_family = AF_INET;
  ca.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ca.sin_port = htons((unsigned short)net_quiet_udp_port());
  CU_ASSERT_EQUAL_FATAL(connect(a, (struct sockaddr *)&ca, sizeof ca), 0);
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &r, a, in, sizeof in, pt_on_done, &dr), 0);
  int refused = 0;
  for (int i = 0; i < 50 && !refused; i++) {
    int before = atomic_load(&ds.calls);
    CU_ASSERT_EQUAL(
        taxi_proactor_sendto(p, &s, a, "ping", 4, NULL, 0, pt_on_done, &ds), 0);
    CU_ASSERT_FATAL(pt_run_done(p, &ds, before + 1));
    if (ds.status == TAXI_ECONNREFUSED) refused = 1;
    pt_settle(p, 20);
    if (atomic_load(&dr.calls) == 1) {
      CU_ASSERT_EQUAL(dr.status, TAXI_ECONNREFUSED);
      refused = 1;
    }
  }
  CU_ASSERT_TRUE(refused);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, a), 0);
  if (atomic_load(&dr.calls) == 0) CU_ASSERT_FATAL(pt_run_done(p, &dr, 1));
  close(b);
  pt_destroy(p);
}

/* Receives in flight when the handle is closed: each completes once,
 * cancelled, and the socket that gets the number next receives its own
 * datagrams, none taken by a receive of the closed one. */
static void test_close_pending(void) {
  taxi_proactor_t *p = pt_proactor();
  for (int round = 0; round < 20; round++) {
    struct sockaddr_in aa, ba;
    int a = dg_udp(&aa), b = dg_udp(&ba);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, a), 0);
    taxi_op_t r[4];
    pt_done_t d[4];
    char in[4][64];
    for (int i = 0; i < 4; i++) {
      taxi_op_init(&r[i]);
      pt_done_init(&d[i]);
      CU_ASSERT_EQUAL(taxi_proactor_recvfrom(p, &r[i], a, in[i], sizeof in[i],
                                             pt_on_done, &d[i]),
                      0);
    }
    if (round % 2) pt_settle(p, 5); /* submitted, some of the rounds */
    CU_ASSERT_EQUAL(taxi_proactor_close(p, a), 0);
    for (int i = 0; i < 4; i++) {
      CU_ASSERT_FATAL(pt_run_done(p, &d[i], 1));
      CU_ASSERT_EQUAL(d[i].status, TAXI_ECANCELED);
    }
    pt_settle(p, 10);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
    /* The number's next owner. */
    struct sockaddr_in na;
    int n = dg_udp(&na);
    CU_ASSERT_EQUAL(dg_send(b, "mine", 4, &na), 4);
    char got[8];
    CU_ASSERT_EQUAL(dg_plain_recv(n, got, sizeof got), 4);
    close(n);
    close(b);
  }
  pt_destroy(p);
}

static void test_bad_input(void) {
  taxi_proactor_t *p = pt_proactor();
  struct sockaddr_in aa;
  int a = dg_udp(&aa);
  char buf[8];
  taxi_op_t op = TAXI_OP_INIT;
  pt_done_t d;
  pt_done_init(&d);
  /* Not attached. */
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &op, a, buf, sizeof buf, pt_on_done, &d),
      TAXI_ENOENT);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, a), 0);
  CU_ASSERT_EQUAL(taxi_proactor_recvfrom(p, &op, a, buf, 0, pt_on_done, &d),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &op, a, NULL, sizeof buf, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(NULL, &op, a, buf, sizeof buf, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_proactor_recvfrom(p, &op, a, buf, sizeof buf, NULL, &d),
                  TAXI_EINVAL);
  unsigned char big[200] = {0};
  CU_ASSERT_EQUAL(
      taxi_proactor_sendto(p, &op, a, buf, 1, big, sizeof big, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "addr_len"));
  CU_ASSERT_EQUAL(
      taxi_proactor_sendto(p, &op, a, buf, 1, &aa, 0, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_proactor_sendto(p, &op, a, buf, 1, NULL, sizeof aa, pt_on_done, &d),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_proactor_sendto(p, &op, a, NULL, 1, &aa, sizeof aa, pt_on_done, &d),
      TAXI_EINVAL);
  /* None started: no handler ran, the record is idle. */
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_FALSE(taxi_op_in_flight(&op));
  CU_ASSERT_EQUAL(taxi_proactor_close(p, a), 0);
  pt_destroy(p);
}

/* ---- pooled receives ----------------------------------------------------- */

static taxi_proactor_t *dg_pooled_proactor(size_t size) {
  taxi_proactor_options_t o = TAXI_PROACTOR_OPTIONS_INIT;
  o.backend = pt_backend;
  o.flags = util_proactor_flags;
  o.buffer_count = 8;
  o.buffer_max = 8;
  o.buffer_size = size;
  taxi_proactor_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&p, &o), 0);
  return p;
}

/* What a multishot pooled receive delivered, each datagram checked. */
typedef struct dg_sink {
  taxi_proactor_t *p;
  atomic_int got, ended, bad, truncated;
  int status;      /* of the ending */
  size_t last_len; /* of the last datagram */
  unsigned short last_port;
} dg_sink_t;

static void dg_pooled_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  dg_sink_t *k = act;
  if (!op->more) {
    k->status = status;
    atomic_fetch_add(&k->ended, 1);
    return;
  }
  /* Datagram n carries n in its first byte, then dg_byte(n, i). */
  const unsigned char *b = op->data;
  int ok = status == 0 && op->kind == TAXI_OP_RECVFROM && b != NULL;
  if (ok && bytes > 0) {
    unsigned n = b[0];
    for (size_t i = 1; ok && i < bytes; i++) ok = b[i] == dg_byte(n, i);
  }
  if (!ok) atomic_fetch_add(&k->bad, 1);
  if (op->msg_flags & TAXI_MSG_TRUNCATED) atomic_fetch_add(&k->truncated, 1);
  struct sockaddr_in from;
  memcpy(&from, op->peer, sizeof from);
  k->last_port = op->peer_len == sizeof from ? ntohs(from.sin_port) : 0;
  k->last_len = bytes;
  if (b && taxi_proactor_buffer_release(k->p, op->data) != 0)
    atomic_fetch_add(&k->bad, 1);
  atomic_fetch_add(&k->got, 1);
}

/* One multishot receive into the pool: datagrams in order with their
 * sender, an empty one, one longer than a buffer's room cut and flagged,
 * more datagrams than the pool has buffers (each given back), the close
 * ending it cancelled. */
static void test_pooled(void) {
  const size_t size = 1024;
  taxi_proactor_t *p = dg_pooled_proactor(size);
  unsigned feat = 0;
  CU_ASSERT_EQUAL(taxi_proactor_features(p, &feat), 0);
  /* What a buffer holds of a datagram: all of it where taxi picks the
   * buffer, less the kernel's header and address where io_uring does. */
  size_t room = (feat & TAXI_PFEAT_PROVIDED_BUFFERS)
                    ? size - TAXI_PROACTOR_DGRAM_ROOM
                    : size;
  struct sockaddr_in aa, ba;
  int a = dg_udp(&aa), b = dg_udp(&ba);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p, a), 0);
  dg_sink_t k;
  memset(&k, 0, sizeof k);
  k.p = p;
  taxi_op_t op = TAXI_OP_INIT;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_recvfrom_pooled(
                            p, &op, a, TAXI_READ_MULTISHOT, dg_pooled_done, &k),
                        0);
  /* A second input on the handle would wait behind it for good. */
  taxi_op_t other = TAXI_OP_INIT;
  char x[8];
  CU_ASSERT_EQUAL(
      taxi_proactor_recvfrom(p, &other, a, x, sizeof x, pt_on_done, NULL),
      TAXI_EBUSY);
  unsigned char out[2048];
  int sent = 0;
  for (unsigned n = 1; n <= 40; n++) {
    size_t len = n == 1 ? room : 1 + (n * 37u) % (room - 1);
    out[0] = (unsigned char)n;
    for (size_t i = 1; i < len; i++) out[i] = dg_byte(n, i);
    CU_ASSERT_EQUAL(dg_send(b, out, len, &aa), (long)len);
    sent++;
    /* A few at a time: the socket's buffer holds them meanwhile. */
    if (n % 8 == 0) CU_ASSERT_FATAL(pt_run_count(p, &k.got, sent));
  }
  CU_ASSERT_FATAL(pt_run_count(p, &k.got, sent));
  CU_ASSERT_EQUAL(atomic_load(&k.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&k.truncated), 0);
  CU_ASSERT_EQUAL(k.last_port, ntohs(ba.sin_port));
  /* Empty. */
  CU_ASSERT_EQUAL(dg_send(b, out, 0, &aa), 0);
  CU_ASSERT_FATAL(pt_run_count(p, &k.got, ++sent));
  CU_ASSERT_EQUAL(k.last_len, 0);
  /* Longer than the room: cut there, flagged. */
  out[0] = 77;
  for (size_t i = 1; i < room + 100; i++) out[i] = dg_byte(77, i);
  CU_ASSERT_EQUAL(dg_send(b, out, room + 100, &aa), (long)(room + 100));
  CU_ASSERT_FATAL(pt_run_count(p, &k.got, ++sent));
  CU_ASSERT_EQUAL(k.last_len, room);
  CU_ASSERT_EQUAL(atomic_load(&k.truncated), 1);
  CU_ASSERT_EQUAL(atomic_load(&k.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&k.ended), 0);
  /* Every buffer is back. */
  taxi_proactor_stats_t st;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.buffers_held, 0);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, a), 0);
  CU_ASSERT_FATAL(pt_run_count(p, &k.ended, 1));
  CU_ASSERT_EQUAL(k.status, TAXI_ECANCELED);
  pt_settle(p, 10);
  CU_ASSERT_EQUAL(atomic_load(&k.ended), 1);
  close(b);
  pt_destroy(p);
}

static CU_TestInfo dgram_tests[] = {
    {"a datagram out and in: every byte, the sender, empty, truncated",
     test_recv_send},
    {"connected: to the peer, then ICMP port unreachable is ECONNREFUSED",
     test_connected_refused},
    {"receives pending at the close: cancelled once, the number's next "
     "owner gets its own",
     test_close_pending},
    {"bad input refused, nothing started", test_bad_input},
    {"pooled multishot receive: in order, senders, empty, cut at the room, "
     "buffers back",
     test_pooled},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_dgram = {"datagrams", dgram_tests, 120, NULL};
