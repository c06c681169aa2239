/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram.c - UDP datagram endpoints (taxi/dgram.h) over the
 * pair under test: echo of random sizes up to TAXI_DGRAM_MAX with every
 * byte checked, truncation, connected and unconnected endpoints, ICMP
 * port unreachable, IPv6, a thousand endpoints (fewer with
 * TAXI_TEST_SMALL), closing while datagrams arrive and with receives in
 * flight, bad input, no re-arm per datagram, one send a batch of a
 * burst.  Every dispatcher has them:
 * the readiness ones receive at readiness, the Proactor's through
 * taxi_proactor_recvfrom.
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "fault/fault.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static void addr_of(taxi_addr_t *a, const char *host, unsigned port) {
  char text[96];
  snprintf(text, sizeof text, "%s:%u", host, port);
  CU_ASSERT_EQUAL(taxi_addr_parse(a, text), 0);
}

/* ---- echo -----------------------------------------------------------------
 */

static void echo_back(taxi_dgram_t *d, int status, const void *data, size_t len,
                      const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)arg;
  (void)flags;
  if (status == 0) CU_ASSERT_EQUAL(taxi_dgram_send_to(d, data, len, from), 0);
}

/* What the client expects back: the datagram numbered seq, of len bytes. */
struct client {
  atomic_uint got; /* datagrams back, checked */
  atomic_int bad;  /* datagrams back that differed */
  atomic_int errors;
  atomic_int last_status;
  atomic_uint seq;
  atomic_size_t len;
  atomic_int closed;
};

static unsigned char pattern(unsigned seq, size_t i) { return st_byte(seq, i); }

static void client_recv(taxi_dgram_t *d, int status, const void *data,
                        size_t len, const taxi_addr_t *from, unsigned flags,
                        void *arg) {
  struct client *c = arg;
  (void)d;
  (void)from;
  if (status < 0) {
    atomic_store(&c->last_status, status);
    atomic_fetch_add(&c->errors, 1);
    return;
  }
  unsigned seq = atomic_load(&c->seq);
  int ok = len == atomic_load(&c->len) && !(flags & TAXI_DGRAM_TRUNCATED);
  for (size_t i = 0; ok && i < len; i++)
    ok = ((const unsigned char *)data)[i] == pattern(seq, i);
  if (!ok) atomic_fetch_add(&c->bad, 1);
  atomic_fetch_add(&c->got, 1);
}

static void count_close(taxi_dgram_t *d, void *arg) {
  (void)d;
  atomic_fetch_add((atomic_int *)arg, 1);
}

struct want {
  atomic_uint *v;
  unsigned n;
};
static int reached(void *arg) {
  struct want *w = arg;
  return atomic_load(w->v) >= w->n;
}

/* n datagrams of random sizes (the first 0 bytes, the second the
 * largest: TAXI_DGRAM_MAX, or recv_size when that is set) from a client
 * endpoint to an echoing one on `host`, one at a time, each checked when
 * it comes back. */
static void echo_sized(const char *bind_host, const char *host, unsigned n,
                       size_t recv_size) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  char local[64];
  snprintf(local, sizeof local, "%s:0", bind_host);
  taxi_dgram_t *srv, *cli;
  struct client cl;
  memset(&cl, 0, sizeof cl);
  atomic_int closed = 0;
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  if (recv_size) o.recv_size = recv_size;
  size_t most =
      recv_size && recv_size < TAXI_DGRAM_MAX ? recv_size : TAXI_DGRAM_MAX;
  int rc = taxi_dgram_open(&srv, c.io, local, &o, echo_back, NULL);
  if (rc == TAXI_ESYS || rc == TAXI_EBADADDR) {
    printf("no %s here (%s): skipped\n", bind_host, taxi_strerror(rc));
    goto stop;
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&cli, c.io, local, &o, client_recv, &cl), 0);
  taxi_addr_t to;
  addr_of(&to, host, st_dgram_port(srv));
  static unsigned char buf[TAXI_DGRAM_MAX];
  srand(7);
  for (unsigned k = 0; k < n; k++) {
    size_t len = k == 0 ? 0 : k == 1 ? most : (size_t)rand() % (most + 1);
    for (size_t i = 0; i < len; i++) buf[i] = pattern(k, i);
    atomic_store(&cl.seq, k);
    atomic_store(&cl.len, len);
    CU_ASSERT_EQUAL(taxi_dgram_send_to(cli, buf, len, &to), 0);
    struct want w = {&cl.got, k + 1};
    CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
    if (atomic_load(&cl.got) != k + 1) break;
  }
  CU_ASSERT_EQUAL(atomic_load(&cl.got), n);
  CU_ASSERT_EQUAL(atomic_load(&cl.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&cl.errors), 0);
  CU_ASSERT_EQUAL(taxi_dgram_close(srv, count_close, &closed), 0);
  CU_ASSERT_EQUAL(taxi_dgram_close(cli, count_close, &closed), 0);
  struct want w = {(atomic_uint *)&closed, 2};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
stop:
  st_io_stop(&c);
  st_io_destroy(&c);
}

static void echo_over(const char *bind_host, const char *host, unsigned n) {
  echo_sized(bind_host, host, n, 0);
}

static void test_dgram_echo_v4(void) {
  echo_over("127.0.0.1", "127.0.0.1", 200);
}

static void test_dgram_echo_v6(void) { echo_over("[::1]", "[::1]", 50); }

/* Receive buffers a page of the context's pool holds with room to spare:
 * over io_uring the endpoints receive with one multishot receive into
 * the proactor's provided buffers instead of their own. */
static void test_dgram_echo_small(void) {
  echo_sized("127.0.0.1", "127.0.0.1", 300, 2048);
}

/* An IPv4 client of a dual-stack IPv6 endpoint: its sender's address is
 * v4-mapped, and the echo gets back. */
static void test_dgram_dual_stack(void) { echo_over("[::]", "127.0.0.1", 20); }

/* ---- truncation -----------------------------------------------------------
 */

struct trunc {
  atomic_uint got;
  atomic_size_t len;
  atomic_uint flags;
  atomic_int prefix_ok;
};

static void trunc_recv(taxi_dgram_t *d, int status, const void *data,
                       size_t len, const taxi_addr_t *from, unsigned flags,
                       void *arg) {
  struct trunc *t = arg;
  (void)d;
  (void)from;
  if (status < 0) return;
  int ok = 1;
  for (size_t i = 0; i < len; i++)
    ok &= ((const unsigned char *)data)[i] == pattern(3, i);
  atomic_store(&t->len, len);
  atomic_store(&t->flags, flags);
  atomic_store(&t->prefix_ok, ok);
  atomic_fetch_add(&t->got, 1);
}

static void test_dgram_truncated(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_size = 100;
  struct trunc t;
  memset(&t, 0, sizeof t);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, trunc_recv, &t), 0);
  int fd = st_udp_socket(NULL);
  unsigned char buf[300];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = pattern(3, i);
  st_udp_send(fd, st_dgram_port(d), buf, sizeof buf);
  struct want w = {&t.got, 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&t.len), 100);
  CU_ASSERT_EQUAL(atomic_load(&t.flags), TAXI_DGRAM_TRUNCATED);
  CU_ASSERT_TRUE(atomic_load(&t.prefix_ok));
  /* One that fits is not flagged. */
  st_udp_send(fd, st_dgram_port(d), buf, 100);
  w.n = 2;
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&t.len), 100);
  CU_ASSERT_EQUAL(atomic_load(&t.flags), 0);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- connected endpoints --------------------------------------------------
 */

/* A running context *c and an endpoint of it bound to `local` that checks
 * what arrives against *cl (cleared): the endpoint, or NULL when the
 * context's pair is skipped here.  A failed open ends the test. */
static taxi_dgram_t *client_open(st_io_t *c, struct client *cl,
                                 const char *local) {
  if (st_io_create(c) < 0) return NULL;
  st_io_run(c);
  memset(cl, 0, sizeof *cl);
  taxi_dgram_t *d = NULL;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c->io, local, NULL, client_recv, cl), 0);
  return d;
}

static void test_dgram_connected(void) {
  st_io_t c;
  struct client cl;
  taxi_dgram_t *d = client_open(&c, &cl, "127.0.0.1:0");
  if (!d) return;
  /* Unconnected: no default peer. */
  CU_ASSERT_EQUAL(taxi_dgram_send(d, "x", 1), TAXI_ENOENT);
  unsigned port;
  int fd = st_udp_socket(&port);
  char peer[64];
  snprintf(peer, sizeof peer, "127.0.0.1:%u", port);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, peer), 0);
  unsigned char buf[64];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = pattern(5, i);
  CU_ASSERT_EQUAL(taxi_dgram_send(d, buf, sizeof buf), 0);
  unsigned char in[128];
  struct sockaddr_in from;
  socklen_t flen = sizeof from;
  ssize_t n = recvfrom(fd, in, sizeof in, 0, (struct sockaddr *)&from, &flen);
  CU_ASSERT_EQUAL(n, (ssize_t)sizeof buf);
  CU_ASSERT_EQUAL(memcmp(in, buf, sizeof buf), 0);
  CU_ASSERT_EQUAL(ntohs(from.sin_port), st_dgram_port(d));
  /* The peer's answer arrives, with its address. */
  atomic_store(&cl.seq, 5);
  atomic_store(&cl.len, 10);
  st_udp_send(fd, st_dgram_port(d), buf, 10);
  struct want w = {&cl.got, 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&cl.bad), 0);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* The local address: the bound one, and after a connect from a wildcard
 * the one the route picked, with the same port. */
static void test_dgram_address_after_connect(void) {
  st_io_t c;
  struct client cl;
  taxi_dgram_t *d = client_open(&c, &cl, "0.0.0.0:0");
  if (!d) return;
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  CU_ASSERT_EQUAL_FATAL(taxi_dgram_address(d, &a), 0);
  unsigned port = taxi_addr_port(&a);
  CU_ASSERT_NOT_EQUAL(port, 0);
  CU_ASSERT_TRUE(taxi_addr_format(&a, text, sizeof text) > 0);
  char want[64];
  snprintf(want, sizeof want, "0.0.0.0:%u", port);
  CU_ASSERT_STRING_EQUAL(text, want);
  unsigned peer_port;
  int fd = st_udp_socket(&peer_port);
  char peer[64];
  snprintf(peer, sizeof peer, "127.0.0.1:%u", peer_port);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, peer), 0);
  CU_ASSERT_EQUAL(taxi_dgram_address(d, &a), 0);
  CU_ASSERT_TRUE(taxi_addr_format(&a, text, sizeof text) > 0);
  snprintf(want, sizeof want, "127.0.0.1:%u", port);
  CU_ASSERT_STRING_EQUAL(text, want);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* A connected endpoint sending to a port nobody has: the ICMP port
 * unreachable comes back as TAXI_ECONNREFUSED, to the callback or to a
 * later send. */
struct refused {
  st_io_t *c;
  taxi_dgram_t *d;
  struct client *cl;
  atomic_int send_refused;
};

static int refused_seen(void *arg) {
  struct refused *r = arg;
  if (atomic_load(&r->cl->last_status) == TAXI_ECONNREFUSED) return 1;
  int rc = taxi_dgram_send(r->d, "ping", 4);
  if (rc == TAXI_ECONNREFUSED) atomic_store(&r->send_refused, 1);
  return rc == TAXI_ECONNREFUSED;
}

static void icmp_refused(size_t recv_size) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  struct client cl;
  memset(&cl, 0, sizeof cl);
  taxi_dgram_t *d;
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  if (recv_size) o.recv_size = recv_size;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, client_recv, &cl), 0);
  unsigned port = net_quiet_udp_port();
  char peer[64];
  snprintf(peer, sizeof peer, "127.0.0.1:%u", port);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, peer), 0);
  struct refused r = {.c = &c, .d = d, .cl = &cl};
  CU_ASSERT_TRUE(st_wait(refused_seen, &r, 10000));
  /* The endpoint still receives (over a Proactor the error ended the
   * receive it came to, and another took its place). */
  unsigned port2;
  int fd = st_udp_socket(&port2);
  snprintf(peer, sizeof peer, "127.0.0.1:%u", port2);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, peer), 0);
  unsigned before = atomic_load(&cl.got);
  unsigned char buf[32];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = pattern(9, i);
  atomic_store(&cl.seq, 9);
  atomic_store(&cl.len, sizeof buf);
  st_udp_send(fd, st_dgram_port(d), buf, sizeof buf);
  struct want w = {&cl.got, before + 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&cl.bad), 0);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

static void test_dgram_icmp_refused(void) { icmp_refused(0); }

static void test_dgram_icmp_refused_small(void) { icmp_refused(512); }

/* ---- many endpoints -------------------------------------------------------
 */

#define MANY 1000
#define MANY_SMALL 200

struct many {
  atomic_uint got;
  atomic_uint closed;
  atomic_int wrong;
  atomic_int foreign; /* another program's, told and left out */
};

static void many_recv(taxi_dgram_t *d, int status, const void *data, size_t len,
                      const taxi_addr_t *from, unsigned flags, void *arg) {
  struct many *m = arg;
  (void)from;
  (void)flags;
  unsigned p = 0;
  if (status == 0 && len == sizeof p) memcpy(&p, data, sizeof p);
  /* A datagram of another test running beside this one (sent to a port
   * it had bound and closed, which one of ours took since) is not ours:
   * ours carry a port number. */
  if (status == 0 && (len != sizeof p || p > 65535 || p == 0)) {
    atomic_fetch_add(&m->foreign, 1);
    return;
  }
  if (status < 0 || p != st_dgram_port(d)) atomic_fetch_add(&m->wrong, 1);
  atomic_fetch_add(&m->got, 1);
}

static void many_close(taxi_dgram_t *d, void *arg) {
  (void)d;
  atomic_fetch_add(&((struct many *)arg)->closed, 1);
}

static void test_dgram_thousand(void) {
  const unsigned many = util_test_small() ? MANY_SMALL : MANY;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < MANY + 200) {
    rl.rlim_cur = rl.rlim_max < MANY + 200 ? rl.rlim_max : MANY + 200;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < MANY + 200) {
    printf("RLIMIT_NOFILE %lu: too few descriptors, skipped\n",
           (unsigned long)rl.rlim_cur);
    return;
  }
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  /* select watches FD_SETSIZE descriptors at most. */
  if (strstr(st_backend, "select")) {
    printf("select: FD_SETSIZE bounds it, skipped\n");
    goto out;
  }
  st_io_run(&c);
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_size = 64;
  o.recv_batch = 1;
  o.send_queue = TAXI_DGRAM_MAX;
  o.send_slots = 4;
  static taxi_dgram_t *ds[MANY];
  struct many m;
  memset(&m, 0, sizeof m);
  unsigned opened = 0;
  for (; opened < many; opened++) {
    int rc =
        taxi_dgram_open(&ds[opened], c.io, "127.0.0.1:0", &o, many_recv, &m);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc < 0) break;
  }
  int fd = st_udp_socket(NULL);
  for (unsigned i = 0; i < opened; i++) {
    unsigned p = st_dgram_port(ds[i]);
    st_udp_send(fd, p, &p, sizeof p);
  }
  struct want w = {&m.got, opened};
  CU_ASSERT_TRUE(st_wait(reached, &w, 20000));
  CU_ASSERT_EQUAL(atomic_load(&m.got), many);
  CU_ASSERT_EQUAL(atomic_load(&m.wrong), 0);
  if (atomic_load(&m.foreign))
    printf("(%d datagrams of another program left out) ",
           atomic_load(&m.foreign));
  for (unsigned i = 0; i < opened; i++)
    CU_ASSERT_EQUAL(taxi_dgram_close(ds[i], many_close, &m), 0);
  w.v = &m.closed;
  CU_ASSERT_TRUE(st_wait(reached, &w, 20000));
  CU_ASSERT_EQUAL(atomic_load(&m.closed), opened);
  close(fd);
  st_io_stop(&c);
out:
  st_io_destroy(&c);
}

/* ---- closing while datagrams arrive, receives in flight -------------------
 */

struct flood {
  atomic_int closed;      /* the close callback ran */
  atomic_int after_close; /* a receive callback after it */
  atomic_int in_cb;       /* callbacks running now */
  atomic_int overlapped;  /* two at once */
  atomic_uint got;
  atomic_int close_send_rc, close_again_rc;
};

static void flood_recv(taxi_dgram_t *d, int status, const void *data,
                       size_t len, const taxi_addr_t *from, unsigned flags,
                       void *arg) {
  struct flood *f = arg;
  (void)d;
  (void)status;
  (void)data;
  (void)len;
  (void)from;
  (void)flags;
  if (atomic_fetch_add(&f->in_cb, 1) != 0) atomic_store(&f->overlapped, 1);
  if (atomic_load(&f->closed)) atomic_store(&f->after_close, 1);
  atomic_fetch_add(&f->got, 1);
  atomic_fetch_sub(&f->in_cb, 1);
}

static void flood_close(taxi_dgram_t *d, void *arg) {
  struct flood *f = arg;
  if (atomic_load(&f->in_cb) != 0) atomic_store(&f->overlapped, 1);
  /* Closed: a send and a second close are refused. */
  atomic_store(&f->close_send_rc, taxi_dgram_send(d, "x", 1));
  atomic_store(&f->close_again_rc, taxi_dgram_close(d, NULL, NULL));
  atomic_store(&f->closed, 1);
}

static int flood_closed(void *arg) {
  return atomic_load(&((struct flood *)arg)->closed);
}

static void test_dgram_close_while_receiving(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  int fd = st_udp_socket(NULL);
  util_set_nonblock(fd);
  for (int round = 0; round < 30; round++) {
    struct flood f;
    memset(&f, 0, sizeof f);
    taxi_dgram_t *d;
    CU_ASSERT_EQUAL_FATAL(
        taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, flood_recv, &f), 0);
    unsigned p = st_dgram_port(d);
    char buf[256] = {0};
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)p);
    /* Enough to keep it reading when the close comes. */
    for (int i = 0; i < 200; i++)
      (void)sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a);
    CU_ASSERT_EQUAL(taxi_dgram_close(d, flood_close, &f), 0);
    CU_ASSERT_TRUE(st_wait(flood_closed, &f, 10000));
    /* More to the old port: nothing of the endpoint may run. */
    for (int i = 0; i < 20; i++)
      (void)sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a);
    CU_ASSERT_EQUAL(atomic_load(&f.after_close), 0);
    CU_ASSERT_EQUAL(atomic_load(&f.overlapped), 0);
    /* The socket that gets the closed one's number next (the lowest
     * free) receives its own datagram: no receive of the endpoint still
     * named the number (over a Proactor the close waits for the
     * receives' cancellations before it closes the socket). */
    unsigned np;
    int next = st_udp_socket(&np);
    st_udp_send(fd, np, "mine", 4);
    char got[8];
    CU_ASSERT_EQUAL(recv(next, got, sizeof got, 0), 4);
    close(next);
    CU_ASSERT_EQUAL(atomic_load(&f.close_send_rc), TAXI_EBADF);
    CU_ASSERT_EQUAL(atomic_load(&f.close_again_rc), TAXI_EBADF);
  }
  close(fd);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* Endpoints left open are closed by taxi_io_destroy, their close
 * callbacks run. */
static void test_dgram_destroy_closes(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_dgram_t *d;
  struct client cl;
  memset(&cl, 0, sizeof cl);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_EQUAL(
        taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, client_recv, &cl), 0);
  st_io_destroy(&c);
}

/* ---- bad input ------------------------------------------------------------
 */

static void test_dgram_bad_input(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_dgram_t *d = NULL;
  struct client cl;
  memset(&cl, 0, sizeof cl);
  CU_ASSERT_EQUAL(
      taxi_dgram_open(NULL, c.io, "127.0.0.1:0", NULL, client_recv, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_dgram_open(&d, NULL, "127.0.0.1:0", NULL, client_recv, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_open(&d, c.io, NULL, NULL, client_recv, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, NULL, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_dgram_open(&d, c.io, "no address", NULL, client_recv, NULL),
      TAXI_EBADADDR);
  CU_ASSERT_EQUAL(
      taxi_dgram_open(&d, c.io, "unix:/tmp/x.sock", NULL, client_recv, NULL),
      TAXI_EBADADDR);
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_batch = 65;
  CU_ASSERT_EQUAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, client_recv, NULL),
      TAXI_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "recv_batch"));
  taxi_dgram_options_init(&o);
  o.send_queue = 100;
  CU_ASSERT_EQUAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, client_recv, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(d, NULL);

  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, client_recv, &cl), 0);
  static unsigned char big[TAXI_DGRAM_MAX + 1];
  taxi_addr_t to;
  addr_of(&to, "127.0.0.1", st_dgram_port(d));
  CU_ASSERT_EQUAL(taxi_dgram_send_to(d, big, sizeof big, &to), TAXI_EMSGSIZE);
  CU_ASSERT_EQUAL(taxi_dgram_send_to(NULL, big, 1, &to), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_send_to(d, NULL, 1, &to), TAXI_EINVAL);
  taxi_addr_t v6;
  addr_of(&v6, "[::1]", 9);
  CU_ASSERT_EQUAL(taxi_dgram_send_to(d, big, 1, &v6), TAXI_EBADADDR);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, "nowhere"), TAXI_EBADADDR);
  CU_ASSERT_EQUAL(taxi_dgram_connect(d, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_connect(NULL, "127.0.0.1:9"), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_join(d, "127.0.0.1:0", NULL), TAXI_EBADADDR);
  CU_ASSERT_EQUAL(taxi_dgram_join(d, "[ff02::1]:0", NULL), TAXI_EBADADDR);
  CU_ASSERT_EQUAL(taxi_dgram_join(d, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_address(d, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_dgram_close(NULL, NULL, NULL), TAXI_EINVAL);
  /* A zero-length datagram is a datagram. */
  CU_ASSERT_EQUAL(taxi_dgram_send_to(d, NULL, 0, &to), 0);
  CU_ASSERT_EQUAL(taxi_dgram_set_broadcast(d, true), 0);
  /* Multicast: joining works where the host has a route for it; leaving
   * what was joined works too. */
  int jrc = taxi_dgram_join(d, "239.1.2.3:0", "127.0.0.1:0");
  if (jrc == 0)
    CU_ASSERT_EQUAL(taxi_dgram_leave(d, "239.1.2.3:0", "127.0.0.1:0"), 0);
  st_io_run(&c);
  atomic_int closed = 0;
  CU_ASSERT_EQUAL(taxi_dgram_close(d, count_close, &closed), 0);
  struct want w = {(atomic_uint *)&closed, 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- no re-arm per datagram -----------------------------------------------
 */

/* An echoing endpoint answers ping-pongs from a plain socket (over a
 * Proactor, one receive of its batch in flight per ping).  On epoll
 * the reactor's own loop (level-triggered) and the Leader/Followers pool
 * (edge-triggered: the endpoint's hooks receive until the socket is empty)
 * arm its handle with no epoll_ctl per datagram; the half-sync/half-async
 * pool re-arms it one-shot, and is not counted.  Then a burst of more
 * datagrams than one report's rounds take: edge-triggered, the driver's
 * timer takes up the rest, and every one comes back. */
#define DG_PINGS 200
#define DG_BURST 64

static void test_dgram_no_rearm(void) {
  /* Every dispatcher answers the ping-pongs and the burst; the count of
   * epoll_ctl is the readiness pairs' over epoll only (below). */
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, echo_back, NULL), 0);
  st_io_run(&c);
  unsigned port = st_dgram_port(d);
  int fd = st_udp_socket(NULL);
  unsigned char out[32], in[64];
  memset(out, 'u', sizeof out);
  /* The first exchange registers the endpoint: counted from after it. */
  st_udp_send(fd, port, out, sizeof out);
  CU_ASSERT_EQUAL(st_udp_recv(fd, in, sizeof in), (ssize_t)sizeof out);
  unsigned long before = fault_calls("epoll_ctl");
  int failed = 0;
  for (int i = 0; i < DG_PINGS && !failed; i++) {
    out[0] = (unsigned char)i;
    st_udp_send(fd, port, out, sizeof out);
    ssize_t got = st_udp_recv(fd, in, sizeof in);
    failed = got != (ssize_t)sizeof out || in[0] != out[0];
    if (failed)
      printf("(ping %d: %zd bytes back, first %d, errno %d) ", i, got,
             got > 0 ? in[0] : -1, got < 0 ? errno : 0);
  }
  unsigned long ctl = fault_calls("epoll_ctl") - before;
  CU_ASSERT_FALSE(failed);
  if (fault_available() && strcmp(st_backend, "epoll") == 0 &&
      (st_dispatcher == TAXI_IO_REACTOR || st_dispatcher == TAXI_IO_LF)) {
    if (ctl >= DG_PINGS / 10)
      printf("(%lu epoll_ctl for %d datagrams) ", ctl, DG_PINGS);
    CU_ASSERT(ctl < DG_PINGS / 10);
  }
  for (int i = 0; i < DG_BURST; i++) {
    out[0] = (unsigned char)i;
    st_udp_send(fd, port, out, sizeof out);
  }
  int back = 0;
  while (back < DG_BURST &&
         st_udp_recv(fd, in, sizeof in) == (ssize_t)sizeof out)
    back++;
  CU_ASSERT_EQUAL(back, DG_BURST);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- one send a batch ------------------------------------------------------
 */

/* A burst that arrives while the endpoint's callback is busy is delivered
 * in batches of recv_batch whose echoes leave in one sendmmsg each, in
 * order: on a reactor from recvmmsg, over io_uring's multishot receive
 * into the pool from the datagrams the proactor reported behind the one
 * it delivers.  Counted through the fault layer's sendmmsg calls. */
#define DG_GATHER 48

struct gather {
  atomic_int entered, go;
  atomic_uint n;
};

static int flag_set(void *arg) { return atomic_load((atomic_int *)arg) != 0; }

static void gather_echo(taxi_dgram_t *d, int status, const void *data,
                        size_t len, const taxi_addr_t *from, unsigned flags,
                        void *arg) {
  struct gather *g = arg;
  (void)flags;
  if (status < 0) return;
  if (atomic_fetch_add(&g->n, 1) == 0) {
    /* The first holds the dispatching thread until the burst is sent. */
    atomic_store(&g->entered, 1);
    CU_ASSERT_TRUE(st_wait(flag_set, &g->go, 10000));
  }
  CU_ASSERT_EQUAL(taxi_dgram_send_to(d, data, len, from), 0);
}

static void test_dgram_burst_batched_sends(void) {
  bool proactive =
      st_dispatcher == TAXI_IO_PROACTOR || st_dispatcher == TAXI_IO_PROACTORS;
  if (!(proactive && strcmp(st_backend, "uring") == 0) &&
      st_dispatcher != TAXI_IO_REACTOR)
    return;
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  /* Buffers that fit the context's pool: the multishot receive. */
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_size = 512;
  o.recv_batch = 16;
  struct gather g;
  memset(&g, 0, sizeof g);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, gather_echo, &g), 0);
  st_io_run(&c);
  unsigned port = st_dgram_port(d);
  int fd = st_udp_socket(NULL);
  unsigned char out[32], in[64];
  memset(out, 'b', sizeof out);
  unsigned long before = fault_calls("sendmmsg");
  out[0] = 0xff;
  st_udp_send(fd, port, out, sizeof out);
  CU_ASSERT_TRUE(st_wait(flag_set, &g.entered, 10000));
  for (int i = 0; i < DG_GATHER; i++) {
    out[0] = (unsigned char)i;
    st_udp_send(fd, port, out, sizeof out);
  }
  atomic_store(&g.go, 1);
  /* The first back, then the burst in the order sent. */
  int back = 0, misordered = 0;
  for (int i = -1; i < DG_GATHER; i++) {
    ssize_t got = st_udp_recv(fd, in, sizeof in);
    if (got != (ssize_t)sizeof out) {
      printf("(echo %d: %zd bytes, errno %d) ", back, got, got < 0 ? errno : 0);
      break;
    }
    back++;
    if (in[0] != (i < 0 ? 0xff : (unsigned char)i)) misordered++;
  }
  CU_ASSERT_EQUAL(back, DG_GATHER + 1);
  CU_ASSERT_EQUAL(misordered, 0);
  unsigned long sends = fault_calls("sendmmsg") - before;
  if (fault_available()) {
    /* One a datagram would be DG_GATHER + 1; batches of 16, 4 or so. */
    if (sends > DG_GATHER / 4)
      printf("(%lu sendmmsg for %d datagrams) ", sends, DG_GATHER + 1);
    CU_ASSERT(sends <= DG_GATHER / 4);
  }
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_dgram[] = {
    {"dgram_echo_v4", test_dgram_echo_v4},
    {"dgram_echo_v6", test_dgram_echo_v6},
    {"dgram_echo_small", test_dgram_echo_small},
    {"dgram_dual_stack", test_dgram_dual_stack},
    {"dgram_truncated", test_dgram_truncated},
    {"dgram_connected", test_dgram_connected},
    {"dgram_address_after_connect", test_dgram_address_after_connect},
    {"dgram_icmp_refused", test_dgram_icmp_refused},
    {"dgram_icmp_refused_small", test_dgram_icmp_refused_small},
    {"dgram_thousand", test_dgram_thousand},
    {"dgram_close_while_receiving", test_dgram_close_while_receiving},
    {"dgram_destroy_closes", test_dgram_destroy_closes},
    {"dgram_bad_input", test_dgram_bad_input},
    {"dgram_no_rearm", test_dgram_no_rearm},
    {"dgram_burst_batched_sends", test_dgram_burst_batched_sends},
    CU_TEST_INFO_NULL};
