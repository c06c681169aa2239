/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/peer.c - taxi_stream_peer and taxi_stream_local tell the
 * whole address (family, address, port, length) of every TCP stream: one
 * accepted, one connected, and one detached and opened again; under every
 * dispatcher and backend, which each learn the peer their own way (the
 * accept's address, a multishot accept's none, the connect's target,
 * getpeername).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What a stream said of its addresses, kept as text to compare. */
struct said {
  int peer_rc, local_rc;
  unsigned peer_len;
  char peer[TAXI_ADDR_STRLEN], local[TAXI_ADDR_STRLEN];
};

static void tell(taxi_stream_t *s, struct said *w) {
  taxi_addr_t a;
  memset(&a, 0xa5, sizeof a); /* what is not written shows */
  w->peer_rc = taxi_stream_peer(s, &a);
  if (w->peer_rc == 0) {
    w->peer_len = a.len;
    if (taxi_addr_format(&a, w->peer, sizeof w->peer) < 0)
      snprintf(w->peer, sizeof w->peer, "(family %d, %u bytes)", a.family,
               a.len);
  }
  w->local_rc = taxi_stream_local(s, &a);
  if (w->local_rc == 0 && taxi_addr_format(&a, w->local, sizeof w->local) < 0)
    snprintf(w->local, sizeof w->local, "(family %d)", a.family);
}

struct peers {
  atomic_int accepted, connected, reopened, closed;
  taxi_stream_t *first; /* the first accepted stream (referenced) */
  struct said accept[2], connect, reopen;
};

static void p_read(taxi_stream_t *s, int status, const void *data, size_t len) {
  (void)s;
  (void)status;
  (void)data;
  (void)len;
}

static void p_closed(taxi_stream_t *s, int reason) {
  struct peers *p = taxi_stream_data(s);
  (void)reason;
  atomic_fetch_add(&p->closed, 1);
}

static void p_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct peers *p = arg;
  (void)l;
  int i = atomic_load(&p->accepted);
  taxi_stream_set_data(s, p);
  taxi_stream_on_close(s, p_closed);
  if (i < 2) tell(s, &p->accept[i]);
  if (i == 0) {
    taxi_stream_ref(s);
    p->first = s;
  }
  taxi_stream_read_start(s, p_read);
  atomic_store(&p->accepted, i + 1);
}

static void p_connected(taxi_stream_t *s, int status, void *arg) {
  struct peers *p = arg;
  taxi_stream_on_close(s, p_closed);
  if (status == 0) tell(s, &p->connect);
  atomic_store(&p->connected, status == 0 ? 1 : -1);
}

/* The first accepted stream's connection, opened again as a new stream of
 * the same context. */
static void p_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                       size_t len, void *arg) {
  struct peers *p = arg;
  (void)s;
  (void)unread;
  (void)len;
  taxi_stream_t *next;
  if (taxi_stream_open(&next, taxi_stream_io(s), h, NULL) < 0) {
    close(h);
    atomic_store(&p->reopened, -1);
    return;
  }
  taxi_stream_set_data(next, p);
  taxi_stream_on_close(next, p_closed);
  tell(next, &p->reopen);
  /* Sets it going: it closes with the context. */
  taxi_stream_read_start(next, p_read);
  atomic_store(&p->reopened, 1);
}

/* "127.0.0.1:port" of a socket's own end. */
static void sock_name(int fd, char *buf, size_t size) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    snprintf(buf, size, "(getsockname failed)");
    return;
  }
  snprintf(buf, size, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
}

static void check_said(const char *what, const struct said *w, const char *peer,
                       const char *local) {
  if (w->peer_rc != 0 || strcmp(w->peer, peer) != 0 ||
      w->peer_len != sizeof(struct sockaddr_in))
    printf("(%s: peer %s %s, %u bytes; expected %s) ", what,
           taxi_error_name(w->peer_rc), w->peer, w->peer_len, peer);
  CU_ASSERT_EQUAL(w->peer_rc, 0);
  CU_ASSERT_STRING_EQUAL(w->peer, peer);
  CU_ASSERT_EQUAL(w->peer_len, sizeof(struct sockaddr_in));
  CU_ASSERT_EQUAL(w->local_rc, 0);
  CU_ASSERT_STRING_EQUAL(w->local, local);
}

static void test_peer_addresses(void) {
  st_io_t c;
  static struct peers p;
  memset(&p, 0, sizeof p);
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, p_accept, &p, NULL);
  st_io_run(&c);
  char server[64], client[64];
  snprintf(server, sizeof server, "127.0.0.1:%d", port);

  /* Accepted. */
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_FATAL(util_wait_flag(&p.accepted, 1, 10000));
  sock_name(fd, client, sizeof client);
  check_said("accepted", &p.accept[0], client, server);

  /* Connected, and its other end accepted. */
  taxi_stream_t *s;
  CU_ASSERT_EQUAL_FATAL(
      taxi_stream_connect(&s, c.io, server, NULL, p_connected, &p), 0);
  CU_ASSERT(util_wait_flag(&p.connected, 1, 10000));
  CU_ASSERT(util_wait_flag(&p.accepted, 2, 10000));
  check_said("connected", &p.connect, server, p.accept[1].peer);
  check_said("its accepted end", &p.accept[1], p.connect.local, server);

  /* Detached and opened again. */
  CU_ASSERT_EQUAL(taxi_stream_detach(p.first, p_detached, &p), 0);
  CU_ASSERT(util_wait_flag(&p.reopened, 1, 10000));
  check_said("opened again", &p.reopen, client, server);

  close(fd);
  st_io_destroy(&c);
  /* Both accepted, the connected one, the one opened again. */
  CU_ASSERT_EQUAL(atomic_load(&p.closed), 3);
  CU_ASSERT_EQUAL(taxi_stream_unref(p.first), 0);
}

CU_TestInfo st_tests_peer[] = {
    {"peer and local addresses: accepted, connected, opened again",
     test_peer_addresses},
    CU_TEST_INFO_NULL,
};
