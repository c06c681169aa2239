/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/one_thread.c - a TAXI_IO_ONE_THREAD context (taxi/io.h),
 * whose streams take no lock: an echo over several connections served by
 * the thread that made it; every stream function called from another
 * thread refused with TAXI_EPERM (or its NULL, 0, "" or invalid handle),
 * doing nothing, while taxi_io_post reaches the stream through the owner;
 * taxi_io_run and taxi_io_destroy refused there too; the flag refused
 * where several threads would run the callbacks, an unknown flag refused,
 * and a pipe between such a stream and another context's refused.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The pairs whose dispatcher runs every callback in taxi_io_run's caller:
 * reactor, and proactor with one thread. */
static bool one_thread_pair(void) {
  st_pair_load();
  return st_dispatcher == TAXI_IO_REACTOR || st_dispatcher == TAXI_IO_PROACTOR;
}

static int one_thread_create(taxi_io_t **io, unsigned flags) {
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.dispatcher = st_dispatcher;
  o.backend = st_backend;
  o.threads = 1;
  o.flags = flags;
  return taxi_io_create(io, &o);
}

/* ---- the owner serves, another thread is refused ------------------------ */

#define CLIENTS 4

typedef struct owned {
  taxi_io_t *io;
  st_echo_t echo;
  atomic_int port;               /* 0 until listening, -1 if the setup failed */
  _Atomic(taxi_stream_t *) held; /* the first stream accepted */
  pthread_t owner;
  atomic_int run_rc, destroy_rc, posted_in_owner, post_write_rc;
  atomic_int stop_returned; /* the other thread is done with the context */
} owned_t;

static void owned_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  owned_t *w = arg;
  taxi_stream_t *none = NULL;
  atomic_compare_exchange_strong(&w->held, &none, s);
  st_echo_accept(l, s, &w->echo);
}

/* The owner's thread: make the context, listen, run until stopped, then
 * destroy it (the close callbacks run here). */
static void owner_main(void *arg) {
  owned_t *w = arg;
  w->owner = pthread_self();
  taxi_listener_t *l = NULL;
  int rc = one_thread_create(&w->io, TAXI_IO_ONE_THREAD);
  if (rc == 0)
    rc = taxi_listener_create(&l, w->io, "127.0.0.1:0", NULL, owned_accept, w);
  taxi_addr_t a;
  if (rc == 0) rc = taxi_listener_address(l, &a);
  if (rc < 0) {
    printf("setup: %s ", taxi_strerror(rc));
    if (w->io) taxi_io_destroy(w->io);
    w->io = NULL;
    atomic_store(&w->port, -1);
    return;
  }
  atomic_store(&w->port, (int)taxi_addr_port(&a));
  atomic_store(&w->run_rc, taxi_io_run(w->io));
  /* Not while the other thread is still inside its taxi_io_stop: the run
   * may return as soon as the stop's flag is set, before its wake-up byte
   * is written to the socket the destroy closes. */
  util_wait_flag(&w->stop_returned, 1, 20000);
  atomic_store(&w->destroy_rc, taxi_io_destroy(w->io));
}

/* Posted from the other thread: runs in the owner, which may write. */
static void post_write(taxi_io_t *io, int status, void *arg) {
  owned_t *w = arg;
  (void)io;
  if (status != 0) return;
  atomic_store(&w->posted_in_owner, pthread_equal(pthread_self(), w->owner));
  atomic_store(&w->post_write_rc,
               taxi_stream_write(atomic_load(&w->held), "post", 4, NULL, NULL));
}

static void never_pipe(taxi_stream_t *from, taxi_stream_t *to, int status,
                       void *arg) {
  (void)from, (void)to, (void)status, (void)arg;
}
static void never_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  (void)s, (void)status, (void)bytes, (void)arg;
}
static void never_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  (void)s, (void)status, (void)d, (void)n;
}
static void never_post(taxi_stream_t *s, int status, void *arg) {
  (void)s, (void)status, (void)arg;
}
static void never_detach(taxi_stream_t *s, taxi_handle_t h, const void *u,
                         size_t n, void *arg) {
  (void)s, (void)h, (void)u, (void)n, (void)arg;
}
static void never_close(taxi_stream_t *s, int reason) { (void)s, (void)reason; }
static void never_drain(taxi_stream_t *s) { (void)s; }

/* Every call of this thread on s (the owner's) refused, nothing done. */
static void refused_here(taxi_io_t *io, taxi_stream_t *s) {
  char buf[8];
  taxi_addr_t a;
  taxi_tls_info_t info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  taxi_stream_t *made = NULL;
  CU_ASSERT_EQUAL(taxi_stream_write(s, "x", 1, NULL, NULL), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_write_ref(s, "x", 1, never_done, NULL),
                  TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, never_read), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_read_stop(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(
      taxi_stream_read_into(s, buf, sizeof buf, 0, never_done, NULL),
      TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_shutdown(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_end(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_close(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_detach(s, never_detach, NULL), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_set_data(s, buf), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, never_close), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_on_drain(s, never_drain), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_set_timeouts(s, 0, 0, 0), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_set_nodelay(s, 1), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_set_keepalive(s, 1, 60, 10, 3), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_post(s, never_post, NULL), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_ref(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_unref(s), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_peer(s, &a), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_stream_local(s, &a), TAXI_EPERM);
  /* A pipe to a stream of this thread's own context: s is not ours. */
  taxi_io_t *mine = NULL;
  int sv[2];
  if (one_thread_create(&mine, 0) == 0 &&
      socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
    taxi_stream_t *b = NULL;
    CU_ASSERT_EQUAL(taxi_stream_open(&b, mine, sv[0], NULL), 0);
    if (b) {
      CU_ASSERT_EQUAL(taxi_stream_pipe(s, b, never_pipe, NULL), TAXI_EPERM);
      CU_ASSERT_EQUAL(taxi_stream_pipe(b, s, never_pipe, NULL), TAXI_EPERM);
      CU_ASSERT_EQUAL(taxi_stream_close(b), 0);
    } else {
      close(sv[0]);
    }
    close(sv[1]);
  }
  if (mine) CU_ASSERT_EQUAL(taxi_io_destroy(mine), 0);
  CU_ASSERT_EQUAL(taxi_tls_info(s, &info), TAXI_EPERM);
  CU_ASSERT_STRING_EQUAL(taxi_tls_error_text(s), "");
  CU_ASSERT_PTR_NULL(taxi_stream_data(s));
  CU_ASSERT_EQUAL(taxi_stream_handle(s), TAXI_INVALID_HANDLE);
  CU_ASSERT_EQUAL(taxi_stream_write_queued(s), 0);
  CU_ASSERT_EQUAL(taxi_stream_write_room(s), 0);
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&made, io, "127.0.0.1:9", NULL, NULL, NULL),
      TAXI_EPERM);
  CU_ASSERT_PTR_NULL(made);
  CU_ASSERT_EQUAL(taxi_stream_open(&made, io, 0, NULL), TAXI_EPERM);
  CU_ASSERT_PTR_NULL(made);
  CU_ASSERT_EQUAL(taxi_io_run(io), TAXI_EPERM);
  CU_ASSERT_EQUAL(taxi_io_destroy(io), TAXI_EPERM);
  /* What stays callable from anywhere. */
  taxi_stream_counters_t sc;
  CU_ASSERT_EQUAL(taxi_stream_counters(s, &sc), 0);
  CU_ASSERT_PTR_EQUAL(taxi_stream_io(s), io);
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(io, &st), 0);
}

static void test_one_thread_owner_and_others(void) {
  if (!one_thread_pair()) return;
  static owned_t w;
  memset(&w, 0, sizeof w);
  util_thread_t t;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&t, owner_main, &w), 0);
  for (int i = 0; i < 10000 && atomic_load(&w.port) == 0; i++) usleep(1000);
  int port = atomic_load(&w.port);
  CU_ASSERT(port > 0);
  if (port <= 0) {
    util_thread_join(&t, 20000, "the owner's setup");
    return;
  }
  /* A connection kept open, whose stream the checks below use. */
  int fd = st_connect(port);
  CU_ASSERT(fd >= 0);
  for (int i = 0; i < 10000 && !atomic_load(&w.held); i++) usleep(1000);
  taxi_stream_t *s = atomic_load(&w.held);
  CU_ASSERT_PTR_NOT_NULL(s);
  /* The echo, served by the owner alone. */
  for (unsigned c = 0; c < CLIENTS; c++)
    CU_ASSERT_EQUAL(st_echo_client(port, 64 * 1024, 1500, 77 + c), 0);
  if (s && fd >= 0) {
    refused_here(w.io, s);
    /* The kept connection still echoes: nothing above touched it. */
    CU_ASSERT_EQUAL(net_send_all(fd, "abc", 3), 0);
    char in[8];
    CU_ASSERT_EQUAL(net_recv_all(fd, in, 3), 0);
    CU_ASSERT_EQUAL(memcmp(in, "abc", 3), 0);
    /* Another thread's way in: a post, run by the owner. */
    CU_ASSERT_EQUAL(taxi_io_post(w.io, post_write, &w), 0);
    CU_ASSERT_EQUAL(net_recv_all(fd, in, 4), 0);
    CU_ASSERT_EQUAL(memcmp(in, "post", 4), 0);
    CU_ASSERT_EQUAL(atomic_load(&w.posted_in_owner), 1);
    CU_ASSERT_EQUAL(atomic_load(&w.post_write_rc), 0);
  }
  if (fd >= 0) close(fd);
  CU_ASSERT_EQUAL(taxi_io_stop(w.io), 0);
  atomic_store(&w.stop_returned, 1);
  util_thread_join(&t, 20000, "the owner's run and destroy");
  CU_ASSERT_EQUAL(atomic_load(&w.run_rc), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&w.destroy_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&w.echo.accepted), CLIENTS + 1);
  CU_ASSERT_EQUAL(atomic_load(&w.echo.closed), CLIENTS + 1);
}

/* ---- refusals at creation ------------------------------------------------ */

static void test_one_thread_refusals(void) {
  st_pair_load();
  taxi_io_t *io = NULL;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  o.dispatcher = st_dispatcher;
  o.backend = st_backend;
  o.flags = 0x2u; /* no such flag */
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  o.flags = TAXI_IO_ONE_THREAD;
  switch (st_dispatcher) {
    case TAXI_IO_REACTOR:
      return; /* the owner's test makes one */
    case TAXI_IO_PROACTOR:
      o.threads = 2; /* a pool over the proactor */
      break;
    default:
      break; /* lf, hsha, proactors: several threads, whatever the count */
  }
  CU_ASSERT_EQUAL(taxi_io_create(&io, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(io);
  printf("(%s) ", taxi_error_detail());
}

/* ---- a pipe to another context ------------------------------------------ */

static void test_one_thread_pipe_elsewhere(void) {
  if (!one_thread_pair()) return;
  taxi_io_t *solo = NULL, *other = NULL;
  CU_ASSERT_EQUAL_FATAL(one_thread_create(&solo, TAXI_IO_ONE_THREAD), 0);
  CU_ASSERT_EQUAL_FATAL(one_thread_create(&other, 0), 0);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  taxi_stream_t *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL(taxi_stream_open(&a, solo, sv[0], NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_open(&b, other, sv[1], NULL), 0);
  if (a && b) {
    CU_ASSERT_EQUAL(taxi_stream_pipe(a, b, never_pipe, NULL), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_stream_pipe(b, a, never_pipe, NULL), TAXI_EINVAL);
  }
  /* The owner made them: closing and destroying here is its to do. */
  if (a) CU_ASSERT_EQUAL(taxi_stream_close(a), 0);
  if (b) CU_ASSERT_EQUAL(taxi_stream_close(b), 0);
  CU_ASSERT_EQUAL(taxi_io_destroy(solo), 0);
  CU_ASSERT_EQUAL(taxi_io_destroy(other), 0);
}

CU_TestInfo st_tests_one_thread[] = {
    {"one thread: the owner serves, another thread's calls are refused",
     test_one_thread_owner_and_others},
    {"one thread: refused where several threads run callbacks, unknown flag",
     test_one_thread_refusals},
    {"one thread: no pipe to a stream of another context",
     test_one_thread_pipe_elsewhere},
    CU_TEST_INFO_NULL,
};
