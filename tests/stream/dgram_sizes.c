/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/dgram_sizes.c - datagram endpoints whose recv_size a
 * buffer of the context's pool does not hold (the default, 65,536).
 *
 * Over io_uring (proactor:uring, proactors:uring) such an endpoint
 * receives with one multishot receive into the proactor's group of
 * provided buffers sized for it (core/proactor/proactor_groups.h) rather
 * than one receive a datagram into its own buffers: counted here through
 * the proactors' submissions over a ping-pong.  A group run dry (held by
 * a callback that blocks, at a small cap, and growing under the default
 * one) still delivers every datagram, in order; a recv_size below the
 * group's buffers still cuts a longer datagram at recv_size, flagged.
 * taxi_proactor_buffer_release finds a group's buffer from a datagram's
 * address, and refuses it when not held, as the pool's.
 * Every other pair answers the same traffic (no count asserted there).
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
#include <unistd.h>

#define PINGS 200
#define BURST 100

/* The proactors' counters summed (the context's proactor, or its
 * group's); false on the readiness dispatchers. */
static bool sum_stats(taxi_io_t *io, taxi_proactor_stats_t *sum,
                      bool *provided) {
  memset(sum, 0, sizeof *sum);
  *provided = true;
  taxi_proactor_group_t *g = taxi_io_proactor_group(io);
  unsigned n = g ? taxi_proactor_group_count(g) : 1;
  for (unsigned i = 0; i < n; i++) {
    taxi_proactor_t *p =
        g ? taxi_proactor_group_at(g, i) : taxi_io_proactor(io);
    if (!p) return false;
    taxi_proactor_stats_t s;
    unsigned feat = 0;
    CU_ASSERT_EQUAL(taxi_proactor_stats(p, &s), 0);
    if (taxi_proactor_features(p, &feat) != 0 ||
        !(feat & TAXI_PFEAT_PROVIDED_BUFFERS))
      *provided = false;
    sum->submissions += s.submissions;
    sum->buffers += s.buffers;
    sum->buffer_grows += s.buffer_grows;
    sum->buffer_waits += s.buffer_waits;
  }
  return true;
}

/* Whether the pair is a Proactor over io_uring whose rings take provided
 * buffers: the endpoints there receive into the groups. */
static bool grouped(taxi_io_t *io) {
  taxi_proactor_stats_t s;
  bool provided = false;
  if (strcmp(st_backend, "uring") != 0 || !sum_stats(io, &s, &provided))
    return false;
  if (!provided) printf("(io_uring without provided buffers here) ");
  return provided;
}

static void echo(taxi_dgram_t *d, int status, const void *data, size_t len,
                 const taxi_addr_t *from, unsigned flags, void *arg) {
  (void)flags;
  (void)arg;
  if (status == 0) CU_ASSERT_EQUAL(taxi_dgram_send_to(d, data, len, from), 0);
}

/* ---- the default recv_size takes the multishot receive --------------------
 */

/* PINGS ping-pongs of 64 bytes with an echoing endpoint of the default
 * recv_size.  Over io_uring with groups the receive is submitted once for
 * them all (a few more allowed: a throttle or a re-issue); one receive a
 * datagram would be PINGS submissions or more. */
static void test_dgram_default_multishot(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, echo, NULL), 0);
  st_io_run(&c);
  unsigned port = st_dgram_port(d);
  int fd = st_udp_socket(NULL);
  unsigned char out[64], in[128];
  /* The first exchange sets everything up: counted from after it. */
  memset(out, 'p', sizeof out);
  st_udp_send(fd, port, out, sizeof out);
  CU_ASSERT_EQUAL(st_udp_recv(fd, in, sizeof in), (ssize_t)sizeof out);
  taxi_proactor_stats_t before, after;
  bool provided = false;
  bool counted = grouped(c.io) && sum_stats(c.io, &before, &provided);
  int failed = 0;
  for (unsigned k = 0; k < PINGS && !failed; k++) {
    for (size_t i = 0; i < sizeof out; i++) out[i] = st_byte(k, i);
    st_udp_send(fd, port, out, sizeof out);
    ssize_t got = st_udp_recv(fd, in, sizeof in);
    failed = got != (ssize_t)sizeof out || memcmp(in, out, sizeof out) != 0;
    if (failed) printf("(ping %u: %zd bytes back) ", k, got);
  }
  CU_ASSERT_FALSE(failed);
  if (counted && sum_stats(c.io, &after, &provided)) {
    uint64_t subs = after.submissions - before.submissions;
    if (subs >= PINGS / 10)
      printf("(%llu submissions for %d datagrams) ", (unsigned long long)subs,
             PINGS);
    CU_ASSERT(subs < PINGS / 10);
    /* The group's buffers are the proactor's, besides its pool's. */
    CU_ASSERT(after.buffers > 64);
  }
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- truncation in a group's larger buffers -------------------------------
 */

struct cut {
  atomic_uint got;
  atomic_size_t len;
  atomic_uint flags;
  atomic_int prefix_ok;
};

static void cut_recv(taxi_dgram_t *d, int status, const void *data, size_t len,
                     const taxi_addr_t *from, unsigned flags, void *arg) {
  struct cut *t = arg;
  (void)d;
  (void)from;
  if (status < 0) return;
  int ok = 1;
  for (size_t i = 0; ok && i < len; i++)
    ok = ((const unsigned char *)data)[i] == st_byte(5, i);
  atomic_store(&t->len, len);
  atomic_store(&t->flags, flags);
  atomic_store(&t->prefix_ok, ok);
  atomic_fetch_add(&t->got, 1);
}

struct want {
  atomic_uint *v;
  unsigned n;
};
static int reached(void *arg) {
  struct want *w = arg;
  return atomic_load(w->v) >= w->n;
}

/* recv_size 10,000: over io_uring a group of 16 KiB buffers, which hold
 * 12,000 bytes; the endpoint still cuts the datagram at 10,000, flagged,
 * as its own buffers of 10,000 bytes would.  One longer than the group's
 * buffers is cut too (the kernel's cut, then the endpoint's); one of
 * 10,000 bytes is whole. */
static void test_dgram_group_truncated(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.recv_size = 10000;
  struct cut t;
  memset(&t, 0, sizeof t);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", &o, cut_recv, &t), 0);
  int fd = st_udp_socket(NULL);
  static unsigned char buf[20000];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = st_byte(5, i);
  const size_t sizes[] = {12000, 20000, 10000};
  for (unsigned k = 0; k < 3; k++) {
    st_udp_send(fd, st_dgram_port(d), buf, sizes[k]);
    struct want w = {&t.got, k + 1};
    CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
    CU_ASSERT_EQUAL(atomic_load(&t.len), 10000);
    CU_ASSERT_EQUAL(atomic_load(&t.flags),
                    sizes[k] > 10000 ? TAXI_DGRAM_TRUNCATED : 0u);
    CU_ASSERT_TRUE(atomic_load(&t.prefix_ok));
  }
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

/* ---- a group run dry ------------------------------------------------------
 */

struct hold {
  atomic_int entered, go;
  atomic_uint n;     /* datagrams delivered */
  atomic_int order;  /* one came out of order */
  atomic_int closed; /* the close callback ran */
};

static int flag_set(void *arg) { return atomic_load((atomic_int *)arg) != 0; }

static void hold_recv(taxi_dgram_t *d, int status, const void *data, size_t len,
                      const taxi_addr_t *from, unsigned flags, void *arg) {
  struct hold *h = arg;
  (void)d;
  (void)from;
  (void)flags;
  if (status < 0) return;
  unsigned seq = 0;
  if (len >= sizeof seq) memcpy(&seq, data, sizeof seq);
  /* An endpoint's callbacks run one at a time: n is this one's number. */
  unsigned n = atomic_load(&h->n);
  if (len != 64 || seq != n) atomic_store(&h->order, 1);
  if (n == 0) {
    /* The first holds the dispatching thread (and its buffer) while the
     * burst fills the group's buffers and the kernel finds none. */
    atomic_store(&h->entered, 1);
    CU_ASSERT_TRUE(st_wait(flag_set, &h->go, 10000));
  }
  /* Counted last: the test reads order once the count is reached. */
  atomic_store(&h->n, n + 1);
}

static void hold_close(taxi_dgram_t *d, void *arg) {
  (void)d;
  atomic_store(&((struct hold *)arg)->closed, 1);
}

/* 1 + BURST datagrams numbered from 0 while the first's callback blocks:
 * every one delivered, in order.  cap: TAXI_PROACTOR_DGRAM_BUFFERS for the
 * context's proactors (NULL: the default cap).  Over io_uring with
 * groups, at a cap below the burst the receive ends for want of buffers
 * and is issued again without the group growing; under the default cap
 * the group grows instead.  Then the endpoint closes with its receive in
 * flight, and nothing of it runs afterwards. */
static void run_dry(const char *cap) {
  if (cap) setenv("TAXI_PROACTOR_DGRAM_BUFFERS", cap, 1);
  st_io_t c;
  int rc = st_io_create(&c);
  if (cap) unsetenv("TAXI_PROACTOR_DGRAM_BUFFERS");
  if (rc < 0) return;
  struct hold h;
  memset(&h, 0, sizeof h);
  /* Counted from before the endpoint: its group is made with it. */
  taxi_proactor_stats_t before, after;
  bool provided = false;
  bool counted = grouped(c.io) && sum_stats(c.io, &before, &provided);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, hold_recv, &h), 0);
  st_io_run(&c);
  unsigned port = st_dgram_port(d);
  int fd = st_udp_socket(NULL);
  unsigned char out[64];
  memset(out, 0, sizeof out);
  st_udp_send(fd, port, out, sizeof out);
  CU_ASSERT_TRUE(st_wait(flag_set, &h.entered, 10000));
  for (unsigned k = 1; k <= BURST; k++) {
    memcpy(out, &k, sizeof k);
    st_udp_send(fd, port, out, sizeof out);
  }
  atomic_store(&h.go, 1);
  struct want w = {&h.n, BURST + 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&h.n), BURST + 1);
  CU_ASSERT_EQUAL(atomic_load(&h.order), 0);
  if (counted && sum_stats(c.io, &after, &provided)) {
    uint64_t grows = after.buffer_grows - before.buffer_grows;
    uint64_t subs = after.submissions - before.submissions;
    /* The group: 8 buffers made with the endpoint (the first of a
     * group, and the cap here), the receive submitted when the endpoint
     * opened, and again after it ended for want of buffers. */
    uint64_t made = after.buffers - before.buffers;
    if (cap) {
      CU_ASSERT_EQUAL(grows, 0);
      CU_ASSERT_EQUAL(made, 8);
      CU_ASSERT(subs >= 2);
    } else {
      CU_ASSERT(grows >= 1);
      CU_ASSERT(made > 8);
    }
  }
  /* Close with the receive in flight and more arriving. */
  for (unsigned k = 0; k < 20; k++) st_udp_send(fd, port, out, sizeof out);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, hold_close, &h), 0);
  CU_ASSERT_TRUE(st_wait(flag_set, &h.closed, 10000));
  unsigned n = atomic_load(&h.n);
  for (unsigned k = 0; k < 20; k++) st_udp_send(fd, port, out, sizeof out);
  /* Nothing runs after the close callback. */
  CU_ASSERT_EQUAL(atomic_load(&h.n), n);
  close(fd);
  st_io_stop(&c);
  st_io_destroy(&c);
}

static void test_dgram_group_dry_at_cap(void) { run_dry("8"); }

static void test_dgram_group_grows(void) { run_dry(NULL); }

/* ---- a group's buffer given back by its address --------------------------
 */

struct give {
  taxi_proactor_t *all[16]; /* the context's proactors, to try each */
  unsigned n;
  atomic_int first, second, none; /* the results */
  atomic_uint got;
  atomic_uint tried; /* 1 once the three results are stored */
};

/* In the callback, data is inside a buffer of the group the proactor lent:
 * taxi_proactor_buffer_release finds it from that address (0), refuses it
 * a second time (TAXI_ENOENT, as for the pool), and refuses a pointer in
 * no buffer (TAXI_EINVAL).  The endpoint's own release after the callback
 * then finds it given back already, and is ignored: nothing else arrives
 * meanwhile to take the buffer. */
static void give_recv(taxi_dgram_t *d, int status, const void *data, size_t len,
                      const taxi_addr_t *from, unsigned flags, void *arg) {
  struct give *g = arg;
  (void)d;
  (void)len;
  (void)from;
  (void)flags;
  if (status < 0 || atomic_fetch_add(&g->got, 1) != 0) return;
  int first = TAXI_EINVAL, second = TAXI_EINVAL;
  for (unsigned i = 0; i < g->n && first == TAXI_EINVAL; i++) {
    first = taxi_proactor_buffer_release(g->all[i], (void *)(uintptr_t)data);
    if (first != TAXI_EINVAL)
      second = taxi_proactor_buffer_release(g->all[i], (void *)(uintptr_t)data);
  }
  static char elsewhere;
  atomic_store(&g->none, taxi_proactor_buffer_release(g->all[0], &elsewhere));
  atomic_store(&g->second, second);
  atomic_store(&g->first, first);
  atomic_store(&g->tried, 1);
}

static void test_dgram_group_release(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  if (!grouped(c.io)) {
    st_io_destroy(&c);
    return;
  }
  struct give g;
  memset(&g, 0, sizeof g);
  taxi_proactor_group_t *pg = taxi_io_proactor_group(c.io);
  g.n = pg ? taxi_proactor_group_count(pg) : 1;
  if (g.n > 16) g.n = 16;
  for (unsigned i = 0; i < g.n; i++)
    g.all[i] = pg ? taxi_proactor_group_at(pg, i) : taxi_io_proactor(c.io);
  taxi_dgram_t *d;
  CU_ASSERT_EQUAL_FATAL(
      taxi_dgram_open(&d, c.io, "127.0.0.1:0", NULL, give_recv, &g), 0);
  st_io_run(&c);
  int fd = st_udp_socket(NULL);
  st_udp_send(fd, st_dgram_port(d), "give", 4);
  /* Wait for the results, not for the callback to begin: got counts
   * before the releases run. */
  struct want w = {&g.tried, 1};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  CU_ASSERT_EQUAL(atomic_load(&g.first), 0);
  CU_ASSERT_EQUAL(atomic_load(&g.second), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&g.none), TAXI_EINVAL);
  /* The endpoint receives on. */
  st_udp_send(fd, st_dgram_port(d), "more", 4);
  w = (struct want){&g.got, 2};
  CU_ASSERT_TRUE(st_wait(reached, &w, 10000));
  close(fd);
  CU_ASSERT_EQUAL(taxi_dgram_close(d, NULL, NULL), 0);
  st_io_stop(&c);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_dgram_sizes[] = {
    {"datagram buffer of a group given back by its address",
     test_dgram_group_release},
    {"datagrams at the default recv_size: one multishot receive",
     test_dgram_default_multishot},
    {"datagrams cut at recv_size inside a group's larger buffers",
     test_dgram_group_truncated},
    {"datagram group run dry at its cap: all delivered in order",
     test_dgram_group_dry_at_cap},
    {"datagram group grows under a burst: all delivered in order",
     test_dgram_group_grows},
    CU_TEST_INFO_NULL};
