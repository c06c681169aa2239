/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_order.c - over a Proactor, an endpoint whose
 * receives are not started in the order it delivers them must not stall.
 *
 * The endpoint keeps its receives (one per slot of its buffers) in the
 * proactor's queue for its socket.  Here another receive, a multishot one
 * of the test's own on the same socket, sits in that queue behind them:
 * while it holds the socket's input the proactor refuses every other
 * receive on it (TAXI_EBUSY), so the slot the endpoint hands out then
 * cannot start again.  Once the test's receive is cancelled the endpoint
 * has one receive in flight, into a slot that is not the one it hands out
 * next.  Ping-pongs from a plain socket must all come back, each with its
 * own bytes; before the endpoint learned to go past a slot that holds
 * nothing, the second of them stalled for good.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PINGS 8

/* The test's own receive on the endpoint's socket. */
struct thief {
  taxi_op_t op;
  atomic_uint got;   /* datagrams it took */
  atomic_int ended;  /* its last completion came */
  atomic_int status; /* and with this status */
};

static void thief_done(taxi_op_t *op, int status, size_t bytes, void *act) {
  struct thief *t = act;
  (void)bytes;
  if (op->data)
    CU_ASSERT_EQUAL(
        taxi_proactor_buffer_release(taxi_op_proactor(op), op->data), 0);
  if (status == 0 && op->more) atomic_fetch_add(&t->got, 1);
  if (!op->more) {
    atomic_store(&t->status, status);
    atomic_store(&t->ended, 1);
  }
}

static void echo(taxi_dgram_t *d, int status, const void *data, size_t len,
                 const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)flags;
  (void)arg;
  if (status == 0) CU_ASSERT_EQUAL(taxi_dgram_send_to(d, data, len, from), 0);
}

static int uint_at_least_1(void *arg) {
  return atomic_load((atomic_uint *)arg) >= 1;
}
static int int_set(void *arg) { return atomic_load((atomic_int *)arg) != 0; }

/* The descriptor of the UDP socket bound to 127.0.0.1:port, or -1. */
static int socket_of_port(unsigned port) {
  for (int fd = 3; fd < 4096; fd++) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int type = 0;
    socklen_t tlen = sizeof type;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0 ||
        a.sin_family != AF_INET || ntohs(a.sin_port) != port)
      continue;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
        type == SOCK_DGRAM)
      return fd;
  }
  return -1;
}

/* Start the thief's multishot receive on h, on the proactor h is
 * attached to: 0, or the error of the last proactor tried. */
static int steal_start(taxi_io_t *io, taxi_handle_t h, struct thief *t) {
  taxi_proactor_group_t *g = taxi_io_proactor_group(io);
  unsigned n = g ? taxi_proactor_group_count(g) : 1;
  int rc = TAXI_ENOENT;
  for (unsigned i = 0; i < n && rc == TAXI_ENOENT; i++) {
    taxi_proactor_t *p =
        g ? taxi_proactor_group_at(g, i) : taxi_io_proactor(io);
    taxi_op_init(&t->op);
    rc = taxi_proactor_recvfrom_pooled(p, &t->op, h, TAXI_READ_MULTISHOT,
                                       thief_done, t);
  }
  return rc;
}

/* One datagram of 64 bytes numbered k to port; whether it came back whole
 * (bounded by the socket's time-out). */
static int ping(int fd, unsigned port, unsigned k) {
  unsigned char out[64], in[128];
  for (size_t i = 0; i < sizeof out; i++) out[i] = st_byte(k, i);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  if (sendto(fd, out, sizeof out, 0, (struct sockaddr *)&a, sizeof a) !=
      (ssize_t)sizeof out)
    return 0;
  /* Again after EINTR: io_uring's task work for this thread's requests
   * (the thief's) interrupts a receive with a time-out. */
  ssize_t got;
  do got = recv(fd, in, sizeof in, 0);
  while (got < 0 && errno == EINTR);
  return got == (ssize_t)sizeof out && memcmp(in, out, sizeof out) == 0;
}

/* Send one datagram numbered k to port, no answer expected. */
static void send_only(int fd, unsigned port, unsigned k) {
  unsigned char out[64];
  for (size_t i = 0; i < sizeof out; i++) out[i] = st_byte(k, i);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  CU_ASSERT_EQUAL(
      sendto(fd, out, sizeof out, 0, (struct sockaddr *)&a, sizeof a),
      (ssize_t)sizeof out);
}

static void test_dgram_slot_out_of_turn(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  /* The pair is known once a context was made for it. */
  if (st_dispatcher != TAXI_IO_PROACTOR && st_dispatcher != TAXI_IO_PROACTORS) {
    st_io_destroy(&c);
    return;
  }
  /* The thief needs a buffer pool, which the context gives its proactors
   * over io_uring only: elsewhere a proactor of the test's, with one. */
  taxi_proactor_t *own = NULL;
  if (strncmp(st_backend, "uring", 5) != 0) {
    st_io_destroy(&c);
    if (st_dispatcher == TAXI_IO_PROACTORS) {
      printf("(proactors over %s: no buffer pool: skipped) ", st_backend);
      return;
    }
    taxi_proactor_options_t po;
    taxi_proactor_options_init(&po);
    po.backend = st_backend;
    po.buffer_size = 4096;
    po.buffer_count = 8;
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_create(&own, &po), 0);
    taxi_io_options_t io_o;
    taxi_io_options_init(&io_o);
    io_o.proactor = own;
    if (st_io_create_with(&c, &io_o) < 0) {
      taxi_proactor_destroy(own);
      return;
    }
  }
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  /* Above what the proactor's groups of provided buffers serve (64 KiB):
   * the endpoint's own slots, on io_uring too. */
  o.recv_size = 70000;
  o.recv_batch = 2;
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, echo, NULL), 0);
  taxi_addr_t local;
  CU_ASSERT_EQUAL_FATAL(taxi_dgram_address(d, &local), 0);
  unsigned port = taxi_addr_port(&local);
  int h = socket_of_port(port);
  CU_ASSERT_FATAL(h >= 0);
  static struct thief t;
  memset(&t, 0, sizeof t);
  /* Behind the endpoint's two receives (nothing runs yet). */
  CU_ASSERT_EQUAL_FATAL(steal_start(c.io, (taxi_handle_t)h, &t), 0);
  st_io_run(&c);

  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  CU_ASSERT_FATAL(fd >= 0);
  struct timeval tv = {.tv_sec = 5};
  CU_ASSERT_EQUAL(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  /* Slots 0 and 1 each take a ping; slot 1's new start finds the thief
   * holding the input, and is refused. */
  CU_ASSERT_TRUE(ping(fd, port, 0));
  CU_ASSERT_TRUE(ping(fd, port, 1));
  /* The thief takes the next one: the setting is as meant. */
  send_only(fd, port, 2);
  CU_ASSERT_TRUE(st_wait(uint_at_least_1, &t.got, 10000));
  CU_ASSERT_EQUAL(taxi_proactor_cancel(taxi_op_proactor(&t.op), &t.op), 0);
  CU_ASSERT_TRUE(st_wait(int_set, &t.ended, 10000));
  CU_ASSERT_EQUAL(atomic_load(&t.status), TAXI_ECANCELED);
  CU_ASSERT_EQUAL(atomic_load(&t.got), 1);
  /* Now only slot 0 receives, while slot 1 is the one due next. */
  int ok = 1;
  for (unsigned k = 3; k < 3 + PINGS && ok; k++) {
    ok = ping(fd, port, k);
    if (!ok) printf("(ping %u of %d not answered) ", k - 2, PINGS);
  }
  CU_ASSERT_TRUE(ok);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
  if (own) CU_ASSERT_EQUAL(taxi_proactor_destroy(own), 0);
}

CU_TestInfo st_tests_dgram_order[] = {
    {"dgram_slot_out_of_turn", test_dgram_slot_out_of_turn}, CU_TEST_INFO_NULL};
