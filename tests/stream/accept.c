/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/accept.c - accepting at the kernel's pace: a burst of
 * connections that all wait in the backlog at once is served in full (a
 * listener takes a bounded batch per turn and must come back for the
 * rest), a connection per request allocates nothing once the context has
 * warmed up (released streams' blocks are reused), and the listener
 * options about accepting: TAXI_LISTEN_REUSEPORT (two listeners on one
 * port both accept), defer_accept (a connection that sends nothing is
 * not handed over before its data) and TAXI_LISTEN_SHARDED (a socket per
 * proactor of a group, the kernel spreading connections over them).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a burst of connections ---------------------------------------------- */

#define BURST 500

static int echo_accepted_is(void *arg) {
  st_echo_t *e = arg;
  return atomic_load(&e->accepted) >= (int)e->high;
}

/* 500 clients connect and send a byte each before the context runs: all
 * of them wait in the listen backlog when the listener first looks.  Each
 * one must be accepted and echoed. */
static void test_burst(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.backlog = 1024;
  int port = st_listen(&c, &lo, st_echo_accept, &e, NULL);
  CU_ASSERT_FATAL(port > 0);
  static int fds[BURST];
  int n = 0;
  for (; n < BURST; n++) {
    fds[n] = st_connect(port);
    if (fds[n] < 0) break;
    if (net_send_all(fds[n], "b", 1) < 0) {
      close(fds[n]);
      break;
    }
  }
  CU_ASSERT_EQUAL(n, BURST);
  e.high = n;
  st_io_run(&c);
  CU_ASSERT_TRUE(st_wait(echo_accepted_is, &e, 20000));
  int echoed = 0;
  for (int i = 0; i < n; i++) {
    char b = 0;
    if (net_recv_all(fds[i], &b, 1) == 0 && b == 'b') echoed++;
    close(fds[i]);
  }
  CU_ASSERT_EQUAL(echoed, n);
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), n);
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.accepts, (uint64_t)n);
  st_io_destroy(&c);
}

/* ---- no allocation per connection -----------------------------------------
 */

static atomic_long alloc_calls;

static void *count_malloc(size_t n) {
  atomic_fetch_add(&alloc_calls, 1);
  return malloc(n);
}

static void *count_realloc(void *p, size_t n) {
  atomic_fetch_add(&alloc_calls, 1);
  return realloc(p, n);
}

static void count_free(void *p) { free(p); }

struct closed_at_least {
  taxi_io_t *io;
  uint64_t n;
};

static int closed_at_least(void *arg) {
  struct closed_at_least *w = arg;
  taxi_io_stats_t st;
  return taxi_io_stats(w->io, &st) == 0 && st.streams_closed >= w->n;
}

/* One request on a connection of its own: a byte out, its echo back, the
 * end of the connection seen both ways, and the server's stream closed. */
static int one_request(st_io_t *c, int port, uint64_t closed_before) {
  int fd = st_connect(port);
  if (fd < 0) return -1;
  char b = 0;
  int rc = net_send_all(fd, "r", 1) == 0 && net_recv_all(fd, &b, 1) == 0 &&
                   b == 'r' && shutdown(fd, SHUT_WR) == 0
               ? 0
               : -1;
  char rest[8];
  if (rc == 0 && st_recv_to_eof(fd, rest, sizeof rest) != 0) rc = -1;
  close(fd);
  struct closed_at_least w = {c->io, closed_before + 1};
  if (rc == 0 && !st_wait(closed_at_least, &w, 10000)) rc = -1;
  return rc;
}

static void test_no_alloc(void) {
  /* Set while no object of the library exists (taxi/alloc.h). */
  CU_ASSERT_EQUAL_FATAL(
      util_set_allocator(count_malloc, count_realloc, count_free), 0);
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) goto restore;
  int port = st_listen(&c, NULL, st_echo_accept, &e, NULL);
  CU_ASSERT_FATAL(port > 0);
  st_io_run(&c);
  /* Warm-up: four connections at once leave four blocks behind, more
   * than sequential connections ever need together (a stream's block
   * returns just after its close callback, which may still be on its
   * way when the next connection arrives). */
  int warm[4];
  for (int i = 0; i < 4; i++) CU_ASSERT_TRUE((warm[i] = st_connect(port)) >= 0);
  for (int i = 0; i < 4; i++) {
    char b = 0;
    CU_ASSERT_EQUAL(net_send_all(warm[i], "w", 1), 0);
    CU_ASSERT_EQUAL(net_recv_all(warm[i], &b, 1), 0);
  }
  for (int i = 0; i < 4; i++) close(warm[i]);
  struct closed_at_least w = {c.io, 4};
  CU_ASSERT_TRUE(st_wait(closed_at_least, &w, 10000));
  /* Sequential connections warm what else a connection may touch once
   * (a table of handles growing, a record of the dispatcher's): rounds of
   * them until one allocates nothing, so that a growth the first round
   * missed is not counted below.  Bounded: what allocates per connection
   * allocates in every round, and is counted below all the same. */
  uint64_t closed = 4;
  for (int round = 0; round < 5; round++) {
    long at_start = atomic_load(&alloc_calls);
    for (int i = 0; i < 8; i++, closed++)
      CU_ASSERT_EQUAL(one_request(&c, port, closed), 0);
    if (atomic_load(&alloc_calls) == at_start) break;
  }
  taxi_io_stats_t before, after;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &before), 0);
  long calls_before = atomic_load(&alloc_calls);
  enum { N = 50 };
  int ok = 0;
  for (int i = 0; i < N; i++, closed++)
    if (one_request(&c, port, closed) == 0) ok++;
  long calls = atomic_load(&alloc_calls) - calls_before;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &after), 0);
  CU_ASSERT_EQUAL(ok, N);
  if (calls != 0) printf("(%ld allocations in %d connections) ", calls, (int)N);
  CU_ASSERT_EQUAL(calls, 0);
  CU_ASSERT_EQUAL(after.streams_allocated, before.streams_allocated);
  CU_ASSERT_EQUAL(after.streams_reused - before.streams_reused, (uint64_t)N);
  CU_ASSERT_TRUE(after.streams_allocated >= 4);
  st_io_destroy(&c);
restore:
  CU_ASSERT_EQUAL(util_set_allocator(NULL, NULL, NULL), 0);
}

/* An echo server that notes where each of its streams lives. */
struct placed_echo {
  st_echo_t echo;
  atomic_int n;
  taxi_stream_t *at[16];
};

static void placed_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct placed_echo *p = arg;
  int i = atomic_fetch_add(&p->n, 1);
  if (i < 16) p->at[i] = s;
  st_echo_accept(l, s, &p->echo);
}

/* Streams of other size settings do not take a block that does not fit:
 * requests alternate between two listeners, the second's streams with a
 * bigger ring, and no stream of one ever lives where a stream of the other
 * lived.  (No block is freed here, the spares being far from full, so an
 * address seen on both sides could only be a block shared.)  Whether a
 * given request finds its predecessor's block depends on that block being
 * back already, which the close counter does not wait for, so only the
 * sums and the separation are asserted exactly. */
static void test_sizes_apart(void) {
  st_io_t c;
  struct placed_echo e1, e2;
  memset(&e1, 0, sizeof e1);
  memset(&e2, 0, sizeof e2);
  if (st_io_create(&c) < 0) return;
  int p1 = st_listen(&c, NULL, placed_accept, &e1, NULL);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = 3 * so.high_watermark;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int p2 = st_listen(&c, &lo, placed_accept, &e2, NULL);
  CU_ASSERT_FATAL(p1 > 0 && p2 > 0);
  st_io_run(&c);
  enum { ROUNDS = 6 };
  uint64_t closed = 0;
  for (int i = 0; i < ROUNDS; i++) {
    CU_ASSERT_EQUAL(one_request(&c, p1, closed++), 0);
    CU_ASSERT_EQUAL(one_request(&c, p2, closed++), 0);
  }
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.streams_allocated + st.streams_reused, 2 * ROUNDS);
  /* At least each listener's first stream allocated; with 2 x 6 requests
   * one after the other, blocks came back and were taken again. */
  CU_ASSERT_TRUE(st.streams_allocated >= 2);
  CU_ASSERT_TRUE(st.streams_reused >= 1);
  CU_ASSERT_EQUAL(atomic_load(&e1.n), ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&e2.n), ROUNDS);
  int shared = 0;
  for (int i = 0; i < ROUNDS; i++)
    for (int j = 0; j < ROUNDS; j++)
      if (e1.at[i] == e2.at[j]) shared++;
  CU_ASSERT_EQUAL(shared, 0);
  st_io_destroy(&c);
}

/* ---- listener options -----------------------------------------------------
 */

/* Listen on a free loopback port with lo, its address in *a: 0, or -1
 * when the system lacks what lo asks (said as skipped; c destroyed). */
static int ac_listen(st_io_t *c, const taxi_listener_options_t *lo,
                     taxi_accept_fn fn, void *arg, const char *lacks,
                     taxi_listener_t **l, taxi_addr_t *a) {
  int rc = taxi_listener_create(l, c->io, "127.0.0.1:0", lo, fn, arg);
  if (rc == TAXI_ENOTSUP) {
    printf("(skipped: no %s here) ", lacks);
    st_io_destroy(c);
    return -1;
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(taxi_listener_address(*l, a), 0);
  return 0;
}

/* Two listeners on one port with TAXI_LISTEN_REUSEPORT: connections from
 * many source ports spread over both (the kernel hashes the 4-tuple). */
static void test_reuseport(void) {
  st_io_t c;
  st_echo_t e1, e2;
  memset(&e1, 0, sizeof e1);
  memset(&e2, 0, sizeof e2);
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_REUSEPORT;
  taxi_listener_t *l1 = NULL, *l2 = NULL;
  taxi_addr_t a;
  char addr[64];
  if (ac_listen(&c, &lo, st_echo_accept, &e1, "balancing SO_REUSEPORT", &l1,
                &a) < 0)
    return;
  CU_ASSERT_TRUE(taxi_addr_format(&a, addr, sizeof addr) > 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_listener_create(&l2, c.io, addr, &lo, st_echo_accept, &e2), 0);
  st_io_run(&c);
  int port = taxi_addr_port(&a);
  int ok = 0;
  for (int i = 0; i < 64; i++) {
    int fd = st_connect(port);
    char b = 0;
    if (fd >= 0 && net_send_all(fd, "p", 1) == 0 &&
        net_recv_all(fd, &b, 1) == 0 && b == 'p')
      ok++;
    if (fd >= 0) close(fd);
  }
  CU_ASSERT_EQUAL(ok, 64);
  CU_ASSERT_EQUAL(atomic_load(&e1.accepted) + atomic_load(&e2.accepted), 64);
  /* Both accept: all 64 on one of two would be 2^-63 likely. */
  CU_ASSERT_TRUE(atomic_load(&e1.accepted) > 0);
  CU_ASSERT_TRUE(atomic_load(&e2.accepted) > 0);
  st_io_destroy(&c);
}

/* defer_accept: a connection that sends nothing waits in the kernel; one
 * made after it that sends a byte is handed over (and echoed) first. */
static void test_defer_accept(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.defer_accept = 30;
  taxi_listener_t *l = NULL;
  taxi_addr_t a;
  if (ac_listen(&c, &lo, st_echo_accept, &e, "deferred accept", &l, &a) < 0)
    return;
  int port = taxi_addr_port(&a);
  st_io_run(&c);
  int quiet = st_connect(port);
  int talker = st_connect(port);
  CU_ASSERT_FATAL(quiet >= 0 && talker >= 0);
  char b = 0;
  CU_ASSERT_EQUAL(net_send_all(talker, "t", 1), 0);
  CU_ASSERT_EQUAL(net_recv_all(talker, &b, 1), 0);
  CU_ASSERT_EQUAL(b, 't');
  /* Accepted in the order the kernel queues them: without deferral the
   * quiet one, connected first, would have been handed over before. */
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), 1);
  CU_ASSERT_EQUAL(net_send_all(quiet, "q", 1), 0);
  CU_ASSERT_EQUAL(net_recv_all(quiet, &b, 1), 0);
  CU_ASSERT_EQUAL(b, 'q');
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), 2);
  close(quiet);
  close(talker);
  st_io_destroy(&c);
}

/* defer_accept out of range, and on a socket it cannot apply to. */
static void test_defer_accept_refused(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  taxi_listener_t *l = NULL;
  lo.defer_accept = -1;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo, st_echo_accept, &e),
      TAXI_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(taxi_error_detail(), "defer_accept"));
  lo.defer_accept = 3601;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, c.io, "127.0.0.1:0", &lo, st_echo_accept, &e),
      TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  st_io_destroy(&c);
}

/* ---- a sharded listener ----------------------------------------------------
 */

#define SHARD_CONNS 64

struct sharded {
  pthread_t accepted_in[SHARD_CONNS];
  atomic_int accepted, mismatched, echoed, on_close;
};

/* Each stream remembers the thread that accepted it, and its reads check
 * that they run there too (a stream of a sharded listener stays on the
 * proactor that accepted it). */
struct sh_conn {
  struct sharded *sh;
  pthread_t thread;
};
static struct sh_conn sh_conns[SHARD_CONNS];

static void sh_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct sh_conn *c = taxi_stream_data(s);
  if (status == TAXI_EEOF || status < 0) {
    taxi_stream_close(s);
    return;
  }
  if (!pthread_equal(c->thread, pthread_self()))
    atomic_fetch_add(&c->sh->mismatched, 1);
  if (taxi_stream_write(s, data, len, NULL, NULL) == 0)
    atomic_fetch_add(&c->sh->echoed, 1);
}

static void sh_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct sharded *sh = arg;
  (void)l;
  int i = atomic_fetch_add(&sh->accepted, 1);
  if (i >= SHARD_CONNS) {
    taxi_stream_close(s);
    return;
  }
  sh->accepted_in[i] = pthread_self();
  sh_conns[i].sh = sh;
  sh_conns[i].thread = pthread_self();
  taxi_stream_set_data(s, &sh_conns[i]);
  taxi_stream_read_start(s, sh_read);
}

static void sh_closed(taxi_listener_t *l, void *arg) {
  struct sharded *sh = arg;
  (void)l;
  atomic_fetch_add(&sh->on_close, 1);
}

static int sh_on_close_is_1(void *arg) {
  struct sharded *sh = arg;
  return atomic_load(&sh->on_close) == 1;
}

/* TAXI_LISTEN_SHARDED: one listener to the application whatever the
 * dispatcher; with proactors, a socket per proactor, the kernel spreading
 * connections over them (accept callbacks in both threads), and every
 * stream served where it was accepted.  Paused before the connections,
 * it takes them all once resumed; closed, on_close comes once. */
static void test_sharded(void) {
  st_io_t c;
  static struct sharded sh;
  memset(&sh, 0, sizeof sh);
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_SHARDED;
  lo.on_close = sh_closed;
  taxi_listener_t *l = NULL;
  taxi_addr_t a;
  if (ac_listen(&c, &lo, sh_accept, &sh, "balancing SO_REUSEPORT", &l, &a) < 0)
    return;
  int port = (int)taxi_addr_port(&a);
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
  st_io_run(&c);
  int fds[SHARD_CONNS];
  int n = 0;
  for (; n < SHARD_CONNS; n++) {
    if ((fds[n] = st_connect(port)) < 0) break;
    if (net_send_all(fds[n], "s", 1) < 0) {
      close(fds[n]);
      break;
    }
  }
  CU_ASSERT_EQUAL(n, SHARD_CONNS);
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0);
  int echoed = 0;
  for (int i = 0; i < n; i++) {
    char b = 0;
    if (net_recv_all(fds[i], &b, 1) == 0 && b == 's') echoed++;
  }
  CU_ASSERT_EQUAL(echoed, n);
  CU_ASSERT_EQUAL(atomic_load(&sh.accepted), n);
  if (st_dispatcher == TAXI_IO_PROACTORS && n == SHARD_CONNS) {
    /* A thread per proactor: every read where its accept ran.  (The
     * other dispatchers' threads share one reactor or proactor, and run
     * any callback.) */
    CU_ASSERT_EQUAL(atomic_load(&sh.mismatched), 0);
  }
  for (int i = 0; i < n; i++) close(fds[i]);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT_TRUE(st_wait(sh_on_close_is_1, &sh, 10000));
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&sh.on_close), 1);
  if (st_dispatcher == TAXI_IO_PROACTORS && n == SHARD_CONNS) {
    /* Read once the context's threads are gone (accepted_in is theirs
     * until then).  Two proactors, a socket each: 64 connections all
     * hashed to one of the two would be 2^-63 likely. */
    int threads = 1;
    for (int i = 1; i < n; i++)
      if (!pthread_equal(sh.accepted_in[i], sh.accepted_in[0])) threads = 2;
    CU_ASSERT_EQUAL(threads, 2);
  }
}

/* TAXI_LISTEN_SHARDED is for sockets the listener binds. */
static void test_sharded_adopt_refused(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CU_ASSERT_FATAL(fd >= 0);
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.flags = TAXI_LISTEN_SHARDED;
  taxi_listener_t *l = NULL;
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, c.io, fd, &lo, sh_accept, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_accept[] = {
    {"a burst of connections in the backlog is served in full", test_burst},
    {"a connection per request allocates nothing after warm-up", test_no_alloc},
    {"streams of other sizes do not share blocks", test_sizes_apart},
    {"two REUSEPORT listeners on one port both accept", test_reuseport},
    {"defer_accept hands a connection over with its data", test_defer_accept},
    {"defer_accept out of range is refused", test_defer_accept_refused},
    {"a sharded listener: one to the application, spread by the kernel",
     test_sharded},
    {"TAXI_LISTEN_SHARDED is refused by taxi_listener_adopt",
     test_sharded_adopt_refused},
    CU_TEST_INFO_NULL};
