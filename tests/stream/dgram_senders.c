/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_senders.c - one endpoint, many senders: the sender's
 * address the receive callback is given must be each datagram's own,
 * whatever the datagrams beside it in the same receive batch came from.
 *
 * The readiness dispatchers on Linux build their receive headers once
 * per endpoint and, after each receive, reset only what the kernel wrote
 * (the sender's address is fixed up in place); the Proactor's backends
 * receive into per-operation records.  A header left stale by an earlier
 * datagram would hand one sender's address to another's datagram, and
 * the echo would go to the wrong socket.  So plain sockets of both
 * families send to one echoing endpoint in a round robin, several
 * datagrams each back to back, so that its batches mix senders and
 * families; every sender must get back exactly its own datagrams, and
 * the address recorded for each datagram must be its sender's
 * getsockname() address (IPv4-mapped on a dual-stack endpoint, as
 * taxi/dgram.h says).  An IPv4-only endpoint with IPv4 senders covers the
 * other receive path.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_SENDERS 32
#define ROUNDS 2
#define BURST 3 /* datagrams each sender sends back to back per round */
#define PER_SENDER (ROUNDS * BURST)
#define MAX_LEN 600 /* so that a round fits the default receive buffer */

/* What the endpoint saw of one datagram.  The callback stores `from`,
 * `len` and `ok`, then `done` last: the test thread reads them only once
 * it sees `done`. */
struct seen {
  taxi_addr_t from;
  size_t len;
  int ok; /* the bytes were those the sender sent */
  atomic_int done;
};

struct senders {
  struct seen seen[MAX_SENDERS][PER_SENDER];
  unsigned n;           /* senders */
  atomic_int stray;     /* datagrams naming no sender or sequence number */
  atomic_int twice;     /* datagrams seen a second time */
  atomic_int send_errs; /* echoes taxi_dgram_send_to refused */
};

/* Datagram `seq` of sender `who`: its first two bytes name them, the rest
 * is a pattern of both; 2 to MAX_LEN bytes, the length varying with both. */
static size_t payload_len(unsigned who, unsigned seq) {
  return 2 + (who * 37u + seq * 211u) % (MAX_LEN - 1);
}

static unsigned char payload_byte(unsigned who, unsigned seq, size_t i) {
  if (i == 0) return (unsigned char)who;
  if (i == 1) return (unsigned char)seq;
  return st_byte(who * PER_SENDER + seq, i);
}

static int payload_is(const unsigned char *p, size_t len, unsigned who,
                      unsigned seq) {
  if (len != payload_len(who, seq)) return 0;
  for (size_t i = 0; i < len; i++)
    if (p[i] != payload_byte(who, seq, i)) return 0;
  return 1;
}

/* Record what arrived, then echo it to where it came from. */
static void record_echo(taxi_dgram_t *d, int status, const void *data,
                        size_t len, const taxi_addr_t *from, unsigned flags,
                        void *arg) {
  struct senders *s = arg;
  (void)flags;
  if (status < 0) return;
  const unsigned char *p = data;
  if (len < 2 || p[0] >= s->n || p[1] >= PER_SENDER) {
    atomic_fetch_add(&s->stray, 1);
    return;
  }
  struct seen *e = &s->seen[p[0]][p[1]];
  if (atomic_load(&e->done)) {
    atomic_fetch_add(&s->twice, 1);
  } else {
    e->from = *from;
    e->len = len;
    e->ok = payload_is(p, len, p[0], p[1]);
    atomic_store(&e->done, 1); /* last: the fields above are set */
  }
  if (taxi_dgram_send_to(d, data, len, from) != 0)
    atomic_fetch_add(&s->send_errs, 1);
}

static int is_done(void *arg) { return atomic_load((atomic_int *)arg) != 0; }

/* A plain UDP socket bound to the loopback address of `family` port 0
 * (blocking, 10 s receive time-out, so that a lost echo fails the test
 * instead of hanging it), its address in *name; -1 where that family's
 * loopback cannot be bound. */
static int sender_socket(int family, struct sockaddr_storage *name) {
  memset(name, 0, sizeof *name);
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)name;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)name;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  }
  int fd = socket(family, SOCK_DGRAM, 0);
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)name, len) != 0) {
    close(fd);
    return -1;
  }
  len = sizeof *name;
  CU_ASSERT_EQUAL(getsockname(fd, (struct sockaddr *)name, &len), 0);
  struct timeval tv = {.tv_sec = 10};
  CU_ASSERT_EQUAL(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  return fd;
}

/* Send datagram `seq` of sender `who` to the endpoint on `port` of the
 * sender's loopback address. */
static void send_one(int fd, int family, unsigned port, unsigned who,
                     unsigned seq) {
  unsigned char buf[MAX_LEN];
  size_t len = payload_len(who, seq);
  for (size_t i = 0; i < len; i++) buf[i] = payload_byte(who, seq, i);
  struct sockaddr_storage to;
  memset(&to, 0, sizeof to);
  socklen_t tlen;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&to;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
    tlen = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    a->sin6_port = htons((uint16_t)port);
    tlen = sizeof *a;
  }
  CU_ASSERT_EQUAL(sendto(fd, buf, len, 0, (struct sockaddr *)&to, tlen),
                  (ssize_t)len);
}

/* 1 when `got`, the address the endpoint reported, is the sender's `name`
 * as an endpoint of family `ep_family` reports it: itself, or on an IPv6
 * endpoint an IPv4 sender's address v4-mapped (::ffff:a.b.c.d). */
static int same_sender(const taxi_addr_t *got,
                       const struct sockaddr_storage *name, int ep_family) {
  const struct sockaddr_in *n4 = (const struct sockaddr_in *)name;
  const struct sockaddr_in6 *n6 = (const struct sockaddr_in6 *)name;
  if (ep_family == TAXI_ADDR_IPV4) {
    struct sockaddr_in g;
    if (got->family != TAXI_ADDR_IPV4 || got->len != sizeof g) return 0;
    memcpy(&g, got->sa.bytes, sizeof g);
    return g.sin_family == AF_INET && g.sin_port == n4->sin_port &&
           g.sin_addr.s_addr == n4->sin_addr.s_addr;
  }
  struct sockaddr_in6 g;
  if (got->family != TAXI_ADDR_IPV6 || got->len != sizeof g) return 0;
  memcpy(&g, got->sa.bytes, sizeof g);
  if (g.sin6_family != AF_INET6) return 0;
  if (name->ss_family == AF_INET6)
    return g.sin6_port == n6->sin6_port &&
           memcmp(&g.sin6_addr, &n6->sin6_addr, 16) == 0;
  unsigned char mapped[16] = {[10] = 0xff, [11] = 0xff};
  memcpy(mapped + 12, &n4->sin_addr, 4);
  return g.sin6_port == n4->sin_port && memcmp(&g.sin6_addr, mapped, 16) == 0;
}

/*
 * n senders (IPv4 and IPv6 alternately when `mixed`, else all IPv4) to an
 * echoing endpoint bound to `local`.  Per round every sender in turn sends
 * BURST datagrams back to back, then each reads its echoes: exactly those
 * BURST datagrams, byte for byte; then the endpoint's record of each must
 * be complete, correct, and name its sender.
 */
static void many_senders(const char *local, unsigned n, int mixed) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  struct senders *s = calloc(1, sizeof *s);
  CU_ASSERT_FATAL(s != NULL);
  s->n = n;
  int fds[MAX_SENDERS], fams[MAX_SENDERS];
  struct sockaddr_storage names[MAX_SENDERS];
  unsigned made = 0;
  taxi_dgram_t *d = NULL;
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_batch = 32; /* batches as large as the senders make them */
  int rc = taxi_dgram_open(&d, c.io, local, &o, record_echo, s);
  if (mixed && (rc == TAXI_ESYS || rc == TAXI_EBADADDR)) {
    printf("no IPv6 endpoint here (%s): skipped\n", taxi_strerror(rc));
    goto out;
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  int ep_family = mixed ? TAXI_ADDR_IPV6 : TAXI_ADDR_IPV4;
  for (; made < n; made++) {
    fams[made] = mixed && made % 2 ? AF_INET6 : AF_INET;
    fds[made] = sender_socket(fams[made], &names[made]);
    if (fds[made] < 0) break;
  }
  if (made < n) {
    int err = errno;
    if (fams[made] == AF_INET) {
      CU_FAIL("no socket on 127.0.0.1");
    } else {
      printf("no IPv6 loopback here (errno %d): skipped\n", err);
    }
    goto out;
  }
  unsigned port = st_dgram_port(d);
  int lost = 0;
  for (unsigned r = 0; r < ROUNDS && !lost; r++) {
    /* Round robin: the endpoint's batches hold every sender's datagrams. */
    for (unsigned i = 0; i < n; i++)
      for (unsigned b = 0; b < BURST; b++)
        send_one(fds[i], fams[i], port, i, r * BURST + b);
    for (unsigned i = 0; i < n && !lost; i++) {
      int back[BURST] = {0};
      for (unsigned b = 0; b < BURST; b++) {
        unsigned char in[MAX_LEN + 1];
        ssize_t got = st_udp_recv(fds[i], in, sizeof in);
        if (got < 0) {
          printf("(sender %u: echo %u of round %u lost, errno %d) ", i, b, r,
                 errno);
          CU_FAIL("an echo was lost");
          lost = 1;
          break;
        }
        /* Its own datagram of this round, each once, in any order. */
        unsigned seq = got >= 2 ? in[1] : PER_SENDER;
        int mine = seq >= r * BURST && seq < (r + 1) * BURST &&
                   payload_is(in, (size_t)got, i, seq) && !back[seq % BURST];
        if (!mine)
          printf("(sender %u got %zd bytes naming sender %d seq %d) ", i, got,
                 got >= 1 ? in[0] : -1, got >= 2 ? in[1] : -1);
        CU_ASSERT_TRUE(mine);
        if (mine) back[seq % BURST] = 1;
      }
    }
  }
  /* The endpoint's records: each datagram once, intact, from its sender. */
  unsigned wrong = 0;
  for (unsigned i = 0; i < n; i++)
    for (unsigned q = 0; q < PER_SENDER; q++) {
      struct seen *e = &s->seen[i][q];
      /* After a loss (failed already), those that arrived still tell. */
      if (lost && !atomic_load(&e->done)) continue;
      CU_ASSERT_TRUE_FATAL(st_wait(is_done, &e->done, 10000));
      CU_ASSERT_EQUAL(e->len, payload_len(i, q));
      CU_ASSERT_TRUE(e->ok);
      if (same_sender(&e->from, &names[i], ep_family)) continue;
      if (wrong++ < 4) {
        char text[TAXI_ADDR_STRLEN] = "?";
        (void)taxi_addr_format(&e->from, text, sizeof text);
        printf("(sender %u (%s) datagram %u reported from %s) ", i,
               fams[i] == AF_INET ? "IPv4" : "IPv6", q, text);
      }
    }
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(atomic_load(&s->stray), 0);
  CU_ASSERT_EQUAL(atomic_load(&s->twice), 0);
  CU_ASSERT_EQUAL(atomic_load(&s->send_errs), 0);
  taxi_dgram_counters_t k;
  CU_ASSERT_EQUAL(taxi_dgram_counters(d, &k), 0);
  if (!lost) CU_ASSERT_EQUAL(k.received, (uint64_t)n * PER_SENDER);
out:
  for (unsigned i = 0; i < made; i++) close(fds[i]);
  if (d) CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  /* Stopped before s is freed: no callback runs after this. */
  st_io_stop(&c);
  st_io_destroy(&c);
  free(s);
}

/* 32 senders, IPv4 and IPv6 alternately, to one dual-stack endpoint. */
static void test_dgram_senders_dual_stack(void) {
  many_senders("[::]:0", MAX_SENDERS, 1);
}

/* 16 IPv4 senders to an IPv4 endpoint. */
static void test_dgram_senders_v4(void) { many_senders("127.0.0.1:0", 16, 0); }

CU_TestInfo st_tests_dgram_senders[] = {
    {"dgram_senders_dual_stack", test_dgram_senders_dual_stack},
    {"dgram_senders_v4", test_dgram_senders_v4},
    CU_TEST_INFO_NULL};
