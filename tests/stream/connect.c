/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/connect.c - connecting: an exchange over TCP, IPv6 and
 * Unix-domain sockets, refused, timed out (a listener whose backlog is
 * full drops the handshake), and cancelled by close.
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "fault/fault.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn {
  atomic_int connected, connect_calls, closes, got_pong;
  int connect_status, close_reason;
  char buf[16];
  size_t len;
};

static void c_read(taxi_stream_t *s, int status, const void *data, size_t len) {
  struct conn *k = taxi_stream_data(s);
  if (status < 0) return;
  if (k->len + len <= sizeof k->buf) {
    memcpy(k->buf + k->len, data, len);
    k->len += len;
  }
  if (k->len >= 4) {
    atomic_store(&k->got_pong, 1);
    taxi_stream_close(s);
  }
}

static void c_closed(taxi_stream_t *s, int reason) {
  struct conn *k = taxi_stream_data(s);
  k->close_reason = reason;
  atomic_fetch_add(&k->closes, 1);
}

static void c_connected(taxi_stream_t *s, int status, void *arg) {
  struct conn *k = arg;
  CU_ASSERT_PTR_EQUAL(taxi_stream_data(s), k);
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, c_closed), 0);
  k->connect_status = status;
  atomic_fetch_add(&k->connect_calls, 1);
  if (status == 0) {
    /* TCP options on a TCP stream; a Unix-domain one has none. */
    taxi_addr_t peer;
    if (taxi_stream_peer(s, &peer) == 0 && peer.family != TAXI_ADDR_UNIX) {
      CU_ASSERT_EQUAL(taxi_stream_set_nodelay(s, 1), 0);
      CU_ASSERT_EQUAL(taxi_stream_set_keepalive(s, 1, 30, 5, 3), 0);
    }
    atomic_store(&k->connected, 1);
    CU_ASSERT_EQUAL(taxi_stream_read_start(s, c_read), 0);
  }
}

/* Connect to `address`; exchange "ping" with the echo server behind it. */
static void exchange(st_io_t *c, const char *address) {
  static struct conn k;
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  int rc = taxi_stream_connect(&s, c->io, address, NULL, c_connected, &k);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) return;
  /* Queued before the connection is made: sent once it is. */
  CU_ASSERT_EQUAL(taxi_stream_write(s, "ping", 4, NULL, NULL), 0);
  CU_ASSERT(util_wait_flag(&k.closes, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&k.connect_calls), 1);
  CU_ASSERT_EQUAL(k.connect_status, 0);
  CU_ASSERT_EQUAL(atomic_load(&k.got_pong), 1);
  CU_ASSERT(k.len == 4 && memcmp(k.buf, "ping", 4) == 0);
  CU_ASSERT_EQUAL(k.close_reason, 0);
  CU_ASSERT_EQUAL(atomic_load(&k.closes), 1);
}

static void test_connect_tcp(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, st_echo_accept, &e, NULL);
  st_io_run(&c);
  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  exchange(&c, address);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT_EQUAL(st.connects, 1);
  st_io_destroy(&c);
}

static void test_connect_ipv6_and_any(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_listener_t *l;
  int rc = taxi_listener_create(&l, c.io, "[::1]:0", NULL, st_echo_accept, &e);
  st_io_run(&c);
  char address[80];
  taxi_addr_t a;
  if (rc == 0) {
    taxi_listener_address(l, &a);
    CU_ASSERT_EQUAL(a.family, TAXI_ADDR_IPV6);
    snprintf(address, sizeof address, "[::1]:%u", taxi_addr_port(&a));
    exchange(&c, address);
  } else {
    printf("(no IPv6 loopback here: %s) ", taxi_strerror(rc));
  }
  /* Every address: reachable over IPv4 too. */
  /* Two listeners sharing a port, where the system balances between
   * them. */
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_REUSEPORT;
  rc = taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo, st_echo_accept, &e);
  CU_ASSERT(rc == 0 || rc == TAXI_ENOTSUP);
  if (rc == 0) {
    taxi_listener_address(l, &a);
    snprintf(address, sizeof address, "127.0.0.1:%u", taxi_addr_port(&a));
    CU_ASSERT_EQUAL(
        taxi_listener_create(&l, c.io, address, &lo, st_echo_accept, &e), 0);
    exchange(&c, address);
  }
  rc = taxi_listener_create(&l, c.io, "*:0", NULL, st_echo_accept, &e);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc == 0) {
    taxi_listener_address(l, &a);
    snprintf(address, sizeof address, "127.0.0.1:%u", taxi_addr_port(&a));
    exchange(&c, address);
  }
  st_io_destroy(&c);
}

static void test_connect_unix(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  char path[64], address[80];
  snprintf(path, sizeof path, "/tmp/taxi-stream-%d.sock", (int)getpid());
  unlink(path);
  snprintf(address, sizeof address, "unix:%s", path);
  taxi_listener_t *l;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, address, NULL, st_echo_accept, &e), 0);
  st_io_run(&c);
  exchange(&c, address);
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  taxi_listener_address(l, &a);
  CU_ASSERT_EQUAL(a.family, TAXI_ADDR_UNIX);
  CU_ASSERT(taxi_addr_format(&a, text, sizeof text) > 0);
  CU_ASSERT_STRING_EQUAL(text, address);
#if defined(__linux__)
  snprintf(address, sizeof address, "unix:@taxi-stream-%d", (int)getpid());
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, address, NULL, st_echo_accept, &e), 0);
  exchange(&c, address);
#endif
  st_io_destroy(&c);
  unlink(path);
}

static void expect_failure(st_io_t *c, const char *address,
                           const taxi_stream_options_t *o, int expect) {
  static struct conn k;
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  int rc = taxi_stream_connect(&s, c->io, address, o, c_connected, &k);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) return;
  CU_ASSERT(util_wait_flag(&k.closes, 1, 20000));
  CU_ASSERT_EQUAL(atomic_load(&k.connect_calls), 1);
  CU_ASSERT_EQUAL(k.connect_status, expect);
  CU_ASSERT_EQUAL(k.close_reason, expect);
  util_sleep_ms(20);
  CU_ASSERT_EQUAL(atomic_load(&k.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&k.connected), 0);
}

static void test_connect_refused(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  char address[64];
  int port = 1, refusing = net_refusing_port(AF_INET, &port);
  CU_ASSERT(refusing >= 0);
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  expect_failure(&c, address, NULL, TAXI_ECONNREFUSED);
  if (refusing >= 0) close(refusing);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT_EQUAL(st.connect_errors, 1);
  st_io_destroy(&c);
}

/* A listener with a backlog of 0 that never accepts: once one connection
 * waits in its queue, Linux drops further handshakes (the client retries
 * its SYN), so a connect neither succeeds nor fails. */
static int blackhole(int *port, int fds[4]) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 0))
    return -1;
  getsockname(l, (struct sockaddr *)&a, &len);
  *port = ntohs(a.sin_port);
  for (int i = 0; i < 4; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fds[i], (struct sockaddr *)&a, sizeof a);
  }
  util_sleep_ms(50);
  return l;
}

static void test_connect_timed_out(void) {
  st_io_t c;
  int port = 0, fds[4];
  int l = blackhole(&port, fds);
  CU_ASSERT_FATAL(l >= 0);
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  taxi_stream_options_t o;
  taxi_stream_options_init(&o);
  o.connect_timeout = 300 * TAXI_NSEC_PER_MSEC;
  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%d", port);
  expect_failure(&c, address, &o, TAXI_ETIMEDOUT);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT_EQUAL(st.connect_errors, 1);
  /* Closing cancels a connect in progress. */
  static struct conn k;
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  CU_ASSERT_EQUAL(taxi_stream_connect(&s, c.io, address, NULL, c_connected, &k),
                  0);
  /* The handshake is dropped: the stream is still connecting. */
  util_sleep_ms(50);
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  CU_ASSERT(util_wait_flag(&k.closes, 1, 10000));
  CU_ASSERT_EQUAL(k.connect_status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(k.close_reason, 0);
  st_io_destroy(&c);
  for (int i = 0; i < 4; i++) close(fds[i]);
  close(l);
}

/* accept failing for lack of descriptors (injected): the listener pauses,
 * then serves the waiting client; it does not spin. */
static void test_accept_pause_on_emfile(void) {
  if (!fault_available()) {
    printf("(skipped: %s) ", fault_unavailable_reason());
    return;
  }
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  if (strcmp(taxi_io_backend(c.io), "uring") == 0) {
    printf("(skipped: io_uring accepts in the kernel, not through accept4) ");
    taxi_io_destroy(c.io);
    return;
  }
  int port = st_listen(&c, NULL, st_echo_accept, &e, NULL);
  st_io_run(&c);
  CU_ASSERT_EQUAL(fault_arm("accept4:1:EMFILE:2"), 0);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  char buf[4];
  CU_ASSERT_EQUAL(net_send_all(fd, "ping", 4), 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, buf, 4), 0);
  CU_ASSERT(memcmp(buf, "ping", 4) == 0);
  unsigned long calls = fault_calls("accept4");
  CU_ASSERT_EQUAL(fault_injected("accept4"), 2);
  fault_arm("");
  CU_ASSERT(calls <= 10); /* paused, not spinning */
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT(st.accept_errors >= 1);
  CU_ASSERT_EQUAL(st.accepts, 1);
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_connect[] = {
    {"accept pauses when out of descriptors", test_accept_pause_on_emfile},
    {"connect over TCP and exchange", test_connect_tcp},
    {"IPv6 and every address", test_connect_ipv6_and_any},
    {"Unix-domain (path and abstract)", test_connect_unix},
    {"connect refused", test_connect_refused},
    {"connect timed out; close cancels a connect", test_connect_timed_out},
    CU_TEST_INFO_NULL,
};
