/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/misc.c - timeouts (idle, read, write), application timers,
 * signals under every dispatcher, a stop from a signal handler, and
 * destroying a context whose streams are still open.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- timeouts ------------------------------------------------------------ */

struct tmo {
  atomic_int closes, cancelled;
  int reason;
  int read, produce;
};

static void tmo_closed(taxi_stream_t *s, int reason) {
  struct tmo *t = taxi_stream_data(s);
  t->reason = reason;
  atomic_fetch_add(&t->closes, 1);
}

static void tmo_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  (void)s;
  (void)status;
  (void)d;
  (void)n;
}

static void tmo_write_done(taxi_stream_t *s, int status, size_t b, void *a) {
  struct tmo *t = taxi_stream_data(s);
  (void)b;
  (void)a;
  static unsigned char more[4096];
  if (status == TAXI_ECANCELED || status == TAXI_ETIMEDOUT)
    atomic_fetch_add(&t->cancelled, 1);
  /* Keep the queue full until the kernel's buffers are, too. */
  if (status == 0 && t->produce++ < 64 * 256)
    taxi_stream_write(s, more, sizeof more, tmo_write_done, NULL);
}

static void tmo_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct tmo *t = arg;
  (void)l;
  taxi_stream_set_data(s, t);
  taxi_stream_on_close(s, tmo_closed);
  if (t->read) taxi_stream_read_start(s, tmo_read);
  if (t->produce) {
    static unsigned char chunk[4096];
    while (taxi_stream_write(s, chunk, sizeof chunk, tmo_write_done, NULL) ==
           0) {
    }
  }
}

/* One timeout kind: the stream closes with TAXI_ETIMEDOUT, the peer sees
 * the end of the stream. */
static void one_timeout(const char *what, struct tmo *t,
                        const taxi_stream_options_t *so) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = so;
  int port = st_listen(&c, &lo, tmo_accept, t, NULL);
  st_io_run(&c);
  int fd = st_connect_rcvbuf(port, 4096);
  CU_ASSERT_FATAL(fd >= 0);
  if (!util_wait_flag(&t->closes, 1, 20000)) printf("(%s: no close) ", what);
  CU_ASSERT_EQUAL(t->reason, TAXI_ETIMEDOUT);
  char buf[4096];
  if (!t->produce) CU_ASSERT_EQUAL(st_recv_to_eof(fd, buf, sizeof buf), 0);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT_EQUAL(st.timeouts, 1);
  close(fd);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&t->closes), 1);
}

static void test_timeouts(void) {
  taxi_stream_options_t so;
  static struct tmo t;

  memset(&t, 0, sizeof t);
  taxi_stream_options_init(&so);
  so.idle_timeout = 100 * TAXI_NSEC_PER_MSEC;
  one_timeout("idle", &t, &so);

  memset(&t, 0, sizeof t);
  t.read = 1;
  taxi_stream_options_init(&so);
  so.read_timeout = 100 * TAXI_NSEC_PER_MSEC;
  one_timeout("read", &t, &so);

  /* A peer that does not read: the writes make no progress. */
  memset(&t, 0, sizeof t);
  t.produce = 1;
  taxi_stream_options_init(&so);
  so.high_watermark = 1 << 20;
  so.low_watermark = 0;
  so.max_writes = 256;
  so.write_timeout = 200 * TAXI_NSEC_PER_MSEC;
  one_timeout("write", &t, &so);
  CU_ASSERT(atomic_load(&t.cancelled) >= 1);
}

/* ---- timers ---------------------------------------------------------------
 */

static void tick(taxi_io_timer_t *t, void *arg) {
  (void)t;
  atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_timers(void) {
  st_io_t c;
  static atomic_int once, periodic;
  atomic_store(&once, 0);
  atomic_store(&periodic, 0);
  if (st_io_create(&c) < 0) return;
  taxi_io_timer_t *t1, *t2;
  CU_ASSERT_EQUAL(taxi_io_timer_create(&t1, c.io, tick, &once), 0);
  CU_ASSERT_EQUAL(taxi_io_timer_create(&t2, c.io, tick, &periodic), 0);
  CU_ASSERT_EQUAL(taxi_io_timer_stop(t1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_io_timer_start(t1, 10 * TAXI_NSEC_PER_MSEC, 0), 0);
  CU_ASSERT_EQUAL(
      taxi_io_timer_start(t2, TAXI_NSEC_PER_MSEC, 5 * TAXI_NSEC_PER_MSEC), 0);
  CU_ASSERT_EQUAL(taxi_io_timer_start(t2, -1, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_timer_start(t2, 0, TAXI_TIME_SPAN_MAX + 1),
                  TAXI_EINVAL);
  st_io_run(&c);
  CU_ASSERT(util_wait_flag(&once, 1, 10000));
  CU_ASSERT(util_wait_flag(&periodic, 3, 10000));
  CU_ASSERT_EQUAL(taxi_io_timer_stop(t2), 0);
  int after = atomic_load(&periodic);
  util_sleep_ms(50);
  /* A firing already under way may finish; no further one starts. */
  CU_ASSERT(atomic_load(&periodic) <= after + 1);
  CU_ASSERT_EQUAL(atomic_load(&once), 1);
  /* Restarted, then left armed for destroy to release. */
  CU_ASSERT_EQUAL(taxi_io_timer_start(t1, 0, 0), 0);
  CU_ASSERT(util_wait_flag(&once, 2, 10000));
  CU_ASSERT_EQUAL(taxi_io_timer_start(t2, TAXI_NSEC_PER_SEC, 0), 0);
  CU_ASSERT_EQUAL(taxi_io_timer_destroy(t1), 0);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT(st.timers >= 5);
  st_io_destroy(&c);
}

/* ---- signals --------------------------------------------------------------
 */

static void on_usr1(taxi_io_t *io, int signo, void *arg) {
  (void)io;
  if (signo == SIGUSR1) atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_signal_callback(void) {
  st_io_t c;
  static atomic_int got;
  atomic_store(&got, 0);
  if (st_io_create(&c) < 0) return;
  /* Before the dispatching threads exist (see taxi_io_on_signal). */
  CU_ASSERT_EQUAL(taxi_io_on_signal(c.io, SIGUSR1, on_usr1, &got), 0);
  CU_ASSERT_EQUAL(taxi_io_on_signal(c.io, 0, on_usr1, &got), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_on_signal(c.io, SIGUSR2, NULL, NULL), TAXI_ENOENT);
  st_io_run(&c);
  kill(getpid(), SIGUSR1);
  CU_ASSERT(util_wait_flag(&got, 1, 10000));
  st_io_destroy(&c);
}

static taxi_io_t *stop_target;

static void stop_handler(int signo) {
  (void)signo;
  taxi_io_stop(stop_target); /* async-signal-safe */
}

static void test_stop_from_signal_handler(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  stop_target = c.io;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop_handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, &old);
  st_io_run(&c);
  kill(getpid(), SIGUSR2);
  CU_ASSERT_EQUAL(taxi_io_wait(c.io, 20000), TAXI_ESTOPPED);
  util_thread_join(&c.thread, 20000, "taxi_io_run after a stop in a handler");
  c.thread.started = 0;
  if (c.run_rc != TAXI_ESTOPPED)
    printf("(taxi_io_run: %s) ", taxi_error_name(c.run_rc));
  CU_ASSERT_EQUAL(c.run_rc, TAXI_ESTOPPED);
  /* Stopped stays stopped: a second run returns at once. */
  CU_ASSERT_EQUAL(taxi_io_run(c.io), TAXI_ESTOPPED);
  sigaction(SIGUSR2, &old, NULL);
  st_io_destroy(&c);
}

/* ---- destroy with streams open ---------------------------------------------
 */

#define OPEN_N 10

struct open_streams {
  atomic_int accepted, closes[OPEN_N], writes_done, writes_queued;
};

static void os_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct open_streams *o = arg;
  (void)s;
  (void)bytes;
  (void)status;
  atomic_fetch_add(&o->writes_done, 1);
}

struct os_tag {
  struct open_streams *o;
  int index;
};

static void os_closed_tagged(taxi_stream_t *s, int reason) {
  struct os_tag *tag = taxi_stream_data(s);
  CU_ASSERT_EQUAL(reason, 0);
  atomic_fetch_add(&tag->o->closes[tag->index], 1);
}

static void os_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  static struct os_tag tags[OPEN_N];
  struct open_streams *o = arg;
  (void)l;
  int i = atomic_fetch_add(&o->accepted, 1);
  if (i >= OPEN_N) return;
  tags[i].o = o;
  tags[i].index = i;
  taxi_stream_set_data(s, &tags[i]);
  taxi_stream_on_close(s, os_closed_tagged);
  taxi_stream_read_start(s, tmo_read);
  /* More than the peer takes at once: some writes stay queued. */
  static unsigned char chunk[16384];
  while (taxi_stream_write(s, chunk, sizeof chunk, os_done, o) == 0)
    atomic_fetch_add(&o->writes_queued, 1);
}

static void test_destroy_with_open_streams(void) {
  st_io_t c;
  static struct open_streams o;
  memset(&o, 0, sizeof o);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = 1 << 20;
  so.low_watermark = 0;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, os_accept, &o, NULL);
  st_io_run(&c);
  int fds[OPEN_N];
  for (int i = 0; i < OPEN_N; i++) fds[i] = st_connect_rcvbuf(port, 4096);
  CU_ASSERT(util_wait_flag(&o.accepted, OPEN_N, 10000));
  CU_ASSERT_EQUAL(st_io_stop(&c), TAXI_ESTOPPED);
  /* Everything still open is closed here, each once. */
  CU_ASSERT_EQUAL(taxi_io_destroy(c.io), 0);
  c.io = NULL;
  for (int i = 0; i < OPEN_N; i++)
    CU_ASSERT_EQUAL(atomic_load(&o.closes[i]), 1);
  CU_ASSERT_EQUAL(atomic_load(&o.writes_done), atomic_load(&o.writes_queued));
  for (int i = 0; i < OPEN_N; i++)
    if (fds[i] >= 0) close(fds[i]);
}

CU_TestInfo st_tests_misc[] = {
    {"timeouts: idle, read, write", test_timeouts},
    {"timers: one-shot, periodic, stop, destroy", test_timers},
    {"signal callback", test_signal_callback},
    {"stop from a signal handler; stopped stays stopped",
     test_stop_from_signal_handler},
    {"destroy with streams open: each closed once",
     test_destroy_with_open_streams},
    CU_TEST_INFO_NULL,
};
