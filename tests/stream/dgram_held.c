/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_held.c - the sends an endpoint's own receive
 * callback makes (taxi/dgram.h, "Sends"), over the pair under test.
 *
 * A receive batch of one datagram sends its callback's datagrams at once
 * rather than through the send queue; what the callback sees must not
 * change for that: a send the system refuses still returns 0 and its
 * error reaches the receive callback after the batch, and sends after it
 * still leave.  And sends from a thread of the application's, at the same
 * time as the callbacks' own, all leave, each whole: the endpoint's lock
 * is what orders them (a race detector build checks the rest).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a refused send in the callback of a one-datagram batch -------------
 */

struct refused {
  taxi_addr_t nowhere; /* broadcast, which the endpoint may not send to */
  atomic_uint delivered, errors, sends_failed;
  atomic_int last_error;
  atomic_uint errors_in_order; /* errors that came after their datagram */
};

static void refuse_then_echo(taxi_dgram_t *d, int status, const void *data,
                             size_t len, const taxi_addr_t *from,
                             unsigned flags, void *arg) {
  struct refused *r = arg;
  (void)flags;
  if (status < 0) {
    atomic_store(&r->last_error, status);
    /* Told after the datagram whose callback made the send. */
    if (atomic_load(&r->errors) < atomic_load(&r->delivered))
      atomic_fetch_add(&r->errors_in_order, 1);
    atomic_fetch_add(&r->errors, 1);
    return;
  }
  atomic_fetch_add(&r->delivered, 1);
  /* Refused by the system (no SO_BROADCAST): yet queued as far as the
   * callback can tell, and the echo after it must still leave. */
  if (taxi_dgram_send_to(d, "x", 1, &r->nowhere) != 0)
    atomic_fetch_add(&r->sends_failed, 1);
  if (taxi_dgram_send_to(d, data, len, from) != 0)
    atomic_fetch_add(&r->sends_failed, 1);
}

struct count_at_least {
  atomic_uint *v;
  unsigned n;
};

static int count_reached(void *arg) {
  struct count_at_least *w = arg;
  return atomic_load(w->v) >= w->n;
}

#define REFUSED_PINGS 5

static void test_dgram_one_refused_told_after(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  static struct refused r;
  memset(&r, 0, sizeof r);
  CU_ASSERT_EQUAL(taxi_addr_parse(&r.nowhere, "255.255.255.255:9"), 0);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, refuse_then_echo, &r), 0);
  unsigned port = st_dgram_port(d);
  int fd = st_udp_socket(NULL);
  for (unsigned k = 0; k < REFUSED_PINGS; k++) {
    /* One at a time: each is a receive batch of its own. */
    unsigned char out[8], in[16];
    memset(out, (int)('a' + k), sizeof out);
    st_udp_send(fd, port, out, sizeof out);
    ssize_t n = st_udp_recv(fd, in, sizeof in);
    CU_ASSERT_EQUAL(n, (ssize_t)sizeof out);
    if (n != (ssize_t)sizeof out) break;
    CU_ASSERT_EQUAL(memcmp(in, out, sizeof out), 0);
    struct count_at_least w = {&r.errors, k + 1};
    int told = st_wait(count_reached, &w, 10000);
    CU_ASSERT_TRUE(told);
    if (!told) break;
  }
  CU_ASSERT_EQUAL(atomic_load(&r.delivered), REFUSED_PINGS);
  CU_ASSERT_EQUAL(atomic_load(&r.sends_failed), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.errors), REFUSED_PINGS);
  CU_ASSERT_EQUAL(atomic_load(&r.errors_in_order), REFUSED_PINGS);
  CU_ASSERT_EQUAL(atomic_load(&r.last_error), TAXI_EPERM);
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- the application's sends beside the callbacks' ----------------------
 */

#define BESIDE_PINGS 200
#define BESIDE_SENDS 64

static void echo_back(taxi_dgram_t *d, int status, const void *data, size_t len,
                      const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)flags;
  (void)arg;
  if (status == 0) CU_ASSERT_EQUAL(taxi_dgram_send_to(d, data, len, from), 0);
}

struct pinger {
  unsigned port;
  unsigned answered; /* echoes back, each checked */
};

/* Ping-pong from a plain socket of its own, in a thread of its own. */
static void *pings(void *arg) {
  struct pinger *p = arg;
  int fd = st_udp_socket(NULL);
  for (unsigned k = 0; k < BESIDE_PINGS; k++) {
    unsigned char out[32], in[64];
    for (size_t i = 0; i < sizeof out; i++) out[i] = st_byte(k, i);
    st_udp_send(fd, p->port, out, sizeof out);
    ssize_t n = st_udp_recv(fd, in, sizeof in);
    if (n != (ssize_t)sizeof out || memcmp(in, out, sizeof out) != 0) break;
    p->answered++;
  }
  close(fd);
  return NULL;
}

static void test_dgram_sends_beside_callbacks(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.send_slots = 4 * BESIDE_SENDS; /* room for all, whatever the socket */
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, echo_back, NULL), 0);
  unsigned sink_port;
  int sink = st_udp_socket(&sink_port);
  taxi_addr_t to;
  char text[64];
  snprintf(text, sizeof text, "127.0.0.1:%u", sink_port);
  CU_ASSERT_EQUAL(taxi_addr_parse(&to, text), 0);
  struct pinger p = {.port = st_dgram_port(d)};
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, pings, &p), 0);
  /* This thread sends through the endpoint while the pings are echoed. */
  for (unsigned k = 0; k < BESIDE_SENDS; k++) {
    unsigned char out[48];
    memset(out, 0, sizeof out);
    memcpy(out, &k, sizeof k);
    CU_ASSERT_EQUAL(taxi_dgram_send_to(d, out, sizeof out, &to), 0);
  }
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(p.answered, BESIDE_PINGS);
  /* Every one of this thread's datagrams arrived, whole and in order. */
  for (unsigned k = 0; k < BESIDE_SENDS; k++) {
    unsigned char in[64];
    ssize_t n = st_udp_recv(sink, in, sizeof in);
    CU_ASSERT_EQUAL(n, 48);
    if (n != 48) break;
    unsigned got;
    memcpy(&got, in, sizeof got);
    CU_ASSERT_EQUAL(got, k);
  }
  close(sink);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_dgram_held[] = {
    {"dgram_one_refused_told_after", test_dgram_one_refused_told_after},
    {"dgram_sends_beside_callbacks", test_dgram_sends_beside_callbacks},
    CU_TEST_INFO_NULL};
