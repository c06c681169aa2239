/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/adopt.c - listeners on a socket the application made
 * (taxi_listener_adopt): connections accepted and served, the inputs
 * refused (the socket left open and the caller's), a socket kept open at
 * close with TAXI_LISTEN_KEEP_SOCKET and closed without it; pausing and
 * resuming (taxi_listener_pause / taxi_listener_resume), from the accept
 * callback, from the test's thread and from a thread toggling while
 * clients connect: no connection taken while paused, none lost; and a
 * socket shared with accepts of the application's own.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long the tests let a paused listener have to (wrongly) take a
 * connection before they count what it took: a bounded wait, nothing is
 * measured. */
#define AD_SETTLE_MS 150

/* ---- plain sockets ---------------------------------------------------------
 */

/* A TCP socket bound to 127.0.0.1 on a port the system chooses (stored in
 * *port), listening (backlog 128) if `listening`.  Blocking, as a service
 * manager hands it over.  The descriptor, or -1. */
static int ad_socket(int listening, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      (listening && listen(fd, 128) != 0) ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    close(fd);
    return -1;
  }
  if (port) *port = ntohs(a.sin_port);
  return fd;
}

/* accept() on lfd (non-blocking once adopted), waiting for it with poll,
 * at most max_ms.  The connection, blocking with 10 s time-outs (Winsock
 * hands it over non-blocking like its listener), or -1. */
static int ad_accept(int lfd, int max_ms) {
  taxi_time_t start = taxi_now();
  for (;;) {
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
      struct timeval tv = {10, 0};
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED)
      return -1;
    int left = max_ms - (int)util_elapsed_ms(start);
    if (left <= 0) return -1;
    struct pollfd p = {lfd, POLLIN, 0};
    poll(&p, 1, left < 50 ? left : 50);
  }
}

/* Client n's message, 16 bytes; the echo of it tells the client apart. */
enum { AD_TAG = 16 };
static void ad_tag(char out[AD_TAG + 1], int n) {
  snprintf(out, AD_TAG + 1, "adopt-%09d|", n);
}

static int ad_send_tag(int fd, int n) {
  char t[AD_TAG + 1];
  ad_tag(t, n);
  return net_send_all(fd, t, AD_TAG);
}

/* Receive 16 bytes (bounded by the socket's 10 s time-out): 0 if they are
 * client n's message. */
static int ad_expect_tag(int fd, int n) {
  char t[AD_TAG + 1], got[AD_TAG];
  ad_tag(t, n);
  if (net_recv_all(fd, got, AD_TAG) != 0) return -1;
  return memcmp(got, t, AD_TAG) == 0 ? 0 : -1;
}

/* Client n's message there and back through the echo server. */
static int ad_exchange(int fd, int n) {
  return ad_send_tag(fd, n) == 0 && ad_expect_tag(fd, n) == 0 ? 0 : -1;
}

/* One client served: connected to port, client n's message echoed,
 * closed. */
static void ad_serve_one(int port, int n) {
  int fd = st_connect(port);
  CU_ASSERT(fd >= 0);
  if (fd >= 0) {
    CU_ASSERT_EQUAL(ad_exchange(fd, n), 0);
    close(fd);
  }
}

/* 1 when the socket lfd named as *was was read (fstat) is closed: lfd
 * is free, or names another file now; retried for a while, since the
 * listener's socket may be closed a moment after its on_close (when it
 * is released).  A refused connect to its port would say so too, but
 * another program may listen on the port once it is free (the suites of
 * several builds run at once), so the socket itself is looked at. */
static int ad_closed(int lfd, const struct stat *was) {
  taxi_time_t start = taxi_now();
  for (;;) {
    struct stat now;
    if (fstat(lfd, &now) != 0) return errno == EBADF;
    if (now.st_ino != was->st_ino || now.st_dev != was->st_dev) return 1;
    if (util_elapsed_ms(start) > 5000) return 0;
    util_sleep_ms(10);
  }
}

/* ---- the server: echo, counting, pausing on request ------------------------
 */

struct ad {
  st_echo_t echo; /* first: the echo server's argument is the same pointer */
  atomic_int pause_next; /* the next accept pauses the listener (twice) */
  atomic_int pause_errors, on_close;
};

static void ad_accept_cb(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct ad *a = arg;
  if (atomic_exchange(&a->pause_next, 0)) {
    /* From the accept callback; a second pause does nothing. */
    if (taxi_listener_pause(l) != 0) atomic_fetch_add(&a->pause_errors, 1);
    if (taxi_listener_pause(l) != 0) atomic_fetch_add(&a->pause_errors, 1);
  }
  st_echo_accept(l, s, &a->echo);
}

static void ad_on_close(taxi_listener_t *l, void *arg) {
  struct ad *a = arg;
  (void)l;
  atomic_fetch_add(&a->on_close, 1);
}

/* Adopt lfd into c for a (flags: TAXI_LISTEN_*); the listener, or NULL. */
static taxi_listener_t *ad_adopt(st_io_t *c, int lfd, unsigned flags,
                                 struct ad *a) {
  /* The echo server's streams stop reading while their output is full. */
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.flags = TAXI_STREAM_PAUSE_READING;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  lo.flags = flags;
  lo.on_close = ad_on_close;
  taxi_listener_t *l = NULL;
  int rc =
      taxi_listener_adopt(&l, c->io, (taxi_handle_t)lfd, &lo, ad_accept_cb, a);
  if (rc != 0) printf("(taxi_listener_adopt: %s) ", taxi_error_name(rc));
  CU_ASSERT_EQUAL(rc, 0);
  return rc == 0 ? l : NULL;
}

/* ---- adopting --------------------------------------------------------------
 */

/* A context for the pair and a listener adopting a new listening socket
 * of 127.0.0.1 (*lfd, *port) for a, cleared first (flags:
 * TAXI_LISTEN_*); NULL, everything undone, if any step failed. */
static taxi_listener_t *ad_start(st_io_t *c, struct ad *a, unsigned flags,
                                 int *lfd, int *port) {
  memset(a, 0, sizeof *a);
  *lfd = ad_socket(1, port);
  CU_ASSERT(*lfd >= 0);
  if (*lfd < 0) return NULL;
  if (st_io_create(c) < 0) {
    close(*lfd);
    return NULL;
  }
  taxi_listener_t *l = ad_adopt(c, *lfd, flags, a);
  if (!l) {
    close(*lfd);
    st_io_destroy(c);
  }
  return l;
}

enum { AD_CLIENTS = 8 };

static void test_adopt_accepts(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, 0, &lfd, &port);
  if (!l) return;
  /* The address the caller bound, with its port. */
  taxi_addr_t addr;
  char text[TAXI_ADDR_STRLEN], want[TAXI_ADDR_STRLEN];
  CU_ASSERT_EQUAL(taxi_listener_address(l, &addr), 0);
  CU_ASSERT_EQUAL(addr.family, TAXI_ADDR_IPV4);
  CU_ASSERT_EQUAL((int)taxi_addr_port(&addr), port);
  snprintf(want, sizeof want, "127.0.0.1:%d", port);
  CU_ASSERT(taxi_addr_format(&addr, text, sizeof text) > 0);
  CU_ASSERT_STRING_EQUAL(text, want);
#if !defined(_WIN32)
  /* Made non-blocking, as the contract says (Winsock cannot be asked). */
  CU_ASSERT(fcntl(lfd, F_GETFL) & O_NONBLOCK);
#endif
  st_io_run(&c);

  /* Several clients at once, each accepted and served. */
  int fds[AD_CLIENTS];
  for (int i = 0; i < AD_CLIENTS; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT(fds[i] >= 0);
  }
  for (int i = 0; i < AD_CLIENTS; i++)
    if (fds[i] >= 0) CU_ASSERT_EQUAL(ad_exchange(fds[i], i), 0);
  CU_ASSERT(util_wait_flag(&a.echo.accepted, AD_CLIENTS, 10000));
  for (int i = 0; i < AD_CLIENTS; i++)
    if (fds[i] >= 0) close(fds[i]);
  CU_ASSERT(util_wait_flag(&a.echo.closed, AD_CLIENTS, 10000));
  /* A longer conversation, in random segments. */
  CU_ASSERT_EQUAL(st_echo_client(port, 256 * 1024, 8192, 11), 0);
  CU_ASSERT(util_wait_flag(&a.echo.closed, AD_CLIENTS + 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), AD_CLIENTS + 1);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.write_errors), 0);

  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&a.on_close), 1);
  /* lfd was the listener's: closed with it, not to be closed here. */
}

static void test_adopt_bad_input(void) {
  st_io_t c;
  static struct ad a;
  memset(&a, 0, sizeof a);
  if (st_io_create(&c) < 0) return;
  int port;
  int lfd = ad_socket(1, &port);
  CU_ASSERT_FATAL(lfd >= 0);
  taxi_handle_t h = (taxi_handle_t)lfd;
  taxi_listener_t *l = NULL;
  taxi_listener_options_t lo;

  CU_ASSERT_EQUAL(taxi_listener_adopt(NULL, c.io, h, NULL, ad_accept_cb, &a),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, NULL, h, NULL, ad_accept_cb, &a),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, c.io, h, NULL, NULL, &a),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, c.io, TAXI_INVALID_HANDLE, NULL,
                                      ad_accept_cb, &a),
                  TAXI_EBADF);
  /* Flags about binding, or unknown, are refused. */
  static const unsigned bad_flags[] = {
      TAXI_LISTEN_REUSEPORT, TAXI_LISTEN_V6ONLY, TAXI_LISTEN_NO_REUSEADDR,
      TAXI_LISTEN_KEEP_SOCKET | TAXI_LISTEN_REUSEPORT, 0x100u};
  for (size_t i = 0; i < sizeof bad_flags / sizeof bad_flags[0]; i++) {
    taxi_listener_options_init(&lo);
    lo.flags = bad_flags[i];
    int rc = taxi_listener_adopt(&l, c.io, h, &lo, ad_accept_cb, &a);
    if (rc != TAXI_EINVAL)
      printf("(flags %#x: %s) ", bad_flags[i], taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
  }
  CU_ASSERT_EQUAL(taxi_listener_pause(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_resume(NULL), TAXI_EINVAL);

  /* A socket bound but not listening, and one neither bound nor
   * listening: refused, and still the caller's, open: it listens, and is
   * adopted then. */
  int bport;
  int bfd = ad_socket(0, &bport);
  CU_ASSERT_FATAL(bfd >= 0);
  CU_ASSERT_EQUAL(
      taxi_listener_adopt(&l, c.io, (taxi_handle_t)bfd, NULL, ad_accept_cb, &a),
      TAXI_EINVAL);
  int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CU_ASSERT_FATAL(ufd >= 0);
  CU_ASSERT_EQUAL(
      taxi_listener_adopt(&l, c.io, (taxi_handle_t)ufd, NULL, ad_accept_cb, &a),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(close(ufd), 0);
  CU_ASSERT_EQUAL(listen(bfd, 16), 0);
  l = NULL;
  CU_ASSERT_EQUAL(
      taxi_listener_adopt(&l, c.io, (taxi_handle_t)bfd, NULL, ad_accept_cb, &a),
      0);

#if !defined(_WIN32)
  /* Not a socket (a pipe's end), and a descriptor that is not open: no
   * portable way to make either on Windows. */
  int pfd[2];
  CU_ASSERT_FATAL(pipe(pfd) == 0);
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, c.io, pfd[0], NULL, ad_accept_cb, &a),
                  TAXI_EBADF);
  CU_ASSERT_EQUAL(fcntl(pfd[0], F_GETFD) >= 0, 1); /* left open */
  close(pfd[0]);
  close(pfd[1]);
  /* Closed just now; nothing else of this test opens descriptors before
   * the call (the context does not run). */
  int gone = socket(AF_INET, SOCK_STREAM, 0);
  CU_ASSERT_FATAL(gone >= 0);
  close(gone);
  CU_ASSERT_EQUAL(taxi_listener_adopt(&l, c.io, gone, NULL, ad_accept_cb, &a),
                  TAXI_EBADF);
#endif

  /* lfd, refused each time above, is still open and listening: a client
   * is accepted on it with a plain accept. */
  int cfd = st_connect(port);
  CU_ASSERT(cfd >= 0);
  int afd = cfd >= 0 ? ad_accept(lfd, 10000) : -1;
  CU_ASSERT(afd >= 0);
  if (afd >= 0) {
    CU_ASSERT_EQUAL(ad_send_tag(cfd, 1), 0);
    CU_ASSERT_EQUAL(ad_expect_tag(afd, 1), 0);
    close(afd);
  }
  if (cfd >= 0) close(cfd);
  CU_ASSERT_EQUAL(close(lfd), 0);

  /* The one adopted after listen() serves. */
  st_io_run(&c);
  int fd = st_connect(bport);
  CU_ASSERT(fd >= 0);
  if (fd >= 0) {
    CU_ASSERT_EQUAL(ad_exchange(fd, 2), 0);
    close(fd);
  }
  CU_ASSERT(util_wait_flag(&a.echo.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 1);
  st_io_destroy(&c); /* closes that listener, and bfd with it */
}

/* ---- KEEP_SOCKET -----------------------------------------------------------
 */

/* After the listener of lfd is gone: lfd still listens, and the test
 * accepts a new client on it itself; no accept callback ran for it. */
static void ad_check_still_listening(int lfd, int port, struct ad *a, int n) {
  int before = atomic_load(&a->echo.accepted);
  int cfd = st_connect(port);
  CU_ASSERT(cfd >= 0);
  if (cfd < 0) return;
  int afd = ad_accept(lfd, 10000);
  CU_ASSERT(afd >= 0);
  if (afd >= 0) {
    /* Both ways over the connection the test took. */
    CU_ASSERT_EQUAL(ad_send_tag(cfd, n), 0);
    CU_ASSERT_EQUAL(ad_expect_tag(afd, n), 0);
    CU_ASSERT_EQUAL(ad_send_tag(afd, n + 1), 0);
    CU_ASSERT_EQUAL(ad_expect_tag(cfd, n + 1), 0);
    close(afd);
  }
  close(cfd);
  CU_ASSERT_EQUAL(atomic_load(&a->echo.accepted), before);
}

enum { AD_QUEUED = 3 };

static void test_keep_socket(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, TAXI_LISTEN_KEEP_SOCKET, &lfd, &port);
  if (!l) return;
  st_io_run(&c);
  ad_serve_one(port, 0);
  CU_ASSERT(util_wait_flag(&a.echo.accepted, 1, 10000));

  /* Connections waiting in the queue when the listener closes (it is
   * paused, with nothing pending: none is handed to it) stay there while
   * the socket is open: the caller accepts them after on_close. */
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
  int queued[AD_QUEUED];
  for (int i = 0; i < AD_QUEUED; i++) {
    queued[i] = st_connect(port);
    CU_ASSERT(queued[i] >= 0);
    if (queued[i] >= 0) CU_ASSERT_EQUAL(ad_send_tag(queued[i], 10 + i), 0);
  }
  util_sleep_ms(AD_SETTLE_MS);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 1);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 1);
  /* In the order they connected (one queue). */
  for (int i = 0; i < AD_QUEUED; i++) {
    if (queued[i] < 0) continue;
    int afd = ad_accept(lfd, 10000);
    CU_ASSERT(afd >= 0);
    if (afd < 0) break;
    CU_ASSERT_EQUAL(ad_expect_tag(afd, 10 + i), 0);
    close(afd);
  }
  for (int i = 0; i < AD_QUEUED; i++)
    if (queued[i] >= 0) close(queued[i]);
  /* New ones too, after on_close and after the context is gone. */
  ad_check_still_listening(lfd, port, &a, 20);
  st_io_destroy(&c);
  ad_check_still_listening(lfd, port, &a, 30);
  CU_ASSERT_EQUAL(atomic_load(&a.on_close), 1);
  CU_ASSERT_EQUAL(close(lfd), 0); /* still open: the caller's to close */

  /* Kept, and never closed: taxi_io_destroy leaves the socket open too. */
  memset(&a, 0, sizeof a);
  lfd = ad_socket(1, &port);
  CU_ASSERT_FATAL(lfd >= 0);
  if (st_io_create(&c) < 0) {
    close(lfd);
    return;
  }
  l = ad_adopt(&c, lfd, TAXI_LISTEN_KEEP_SOCKET, &a);
  st_io_run(&c);
  if (l) {
    ad_serve_one(port, 40);
  }
  st_io_destroy(&c);
  ad_check_still_listening(lfd, port, &a, 50);
  CU_ASSERT_EQUAL(close(lfd), 0);
}

static void test_socket_closed_without_keep(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, 0, &lfd, &port);
  if (!l) return;
  struct stat was;
  CU_ASSERT_EQUAL_FATAL(fstat(lfd, &was), 0);
  st_io_run(&c);
  ad_serve_one(port, 0);
  /* Closed by the listener: the socket is gone. */
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  CU_ASSERT(ad_closed(lfd, &was));
  st_io_destroy(&c);

  /* Never closed: closed by taxi_io_destroy. */
  memset(&a, 0, sizeof a);
  lfd = ad_socket(1, &port);
  CU_ASSERT_FATAL(lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(fstat(lfd, &was), 0);
  if (st_io_create(&c) < 0) {
    close(lfd);
    return;
  }
  l = ad_adopt(&c, lfd, 0, &a);
  if (!l) close(lfd);
  st_io_run(&c);
  st_io_destroy(&c);
  if (l) CU_ASSERT(ad_closed(lfd, &was));
}

/* ---- pause and resume ------------------------------------------------------
 */

enum { AD_K = 5, AD_ROUNDS = 3 };

/* l is paused, and no connection was pending when the pause returned (so
 * none can have been handed to an accept in progress): AD_K clients
 * connect and send; none is accepted until the resume (resumed twice),
 * then each is served.  Returns AD_K. */
static int ad_paused_round(taxi_listener_t *l, struct ad *a, int port,
                           int round, int first_tag) {
  int base = atomic_load(&a->echo.accepted);
  int fds[AD_K];
  for (int i = 0; i < AD_K; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT(fds[i] >= 0);
    if (fds[i] >= 0) CU_ASSERT_EQUAL(ad_send_tag(fds[i], first_tag + i), 0);
  }
  util_sleep_ms(AD_SETTLE_MS);
  int taken = atomic_load(&a->echo.accepted) - base;
  if (taken) printf("(round %d: %d accepted while paused) ", round, taken);
  CU_ASSERT_EQUAL(taken, 0);
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0); /* paused already: nothing */
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0);
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0); /* not paused: nothing */
  CU_ASSERT(util_wait_flag(&a->echo.accepted, base + AD_K, 10000));
  for (int i = 0; i < AD_K; i++)
    if (fds[i] >= 0) {
      CU_ASSERT_EQUAL(ad_expect_tag(fds[i], first_tag + i), 0);
      close(fds[i]);
    }
  CU_ASSERT_EQUAL(atomic_load(&a->echo.accepted), base + AD_K);
  return AD_K;
}

static void test_pause_resume(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, 0, &lfd, &port);
  if (!l) return;
  /* Paused before anything connects or runs: nothing is accepted. */
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
  st_io_run(&c);
  int served = ad_paused_round(l, &a, port, 0, 100);

  /* Paused by the first connection's accept callback: that one is served,
   * the next ones wait for the resume. */
  atomic_store(&a.pause_next, 1);
  int fd = st_connect(port);
  CU_ASSERT(fd >= 0);
  if (fd >= 0) CU_ASSERT_EQUAL(ad_exchange(fd, 200), 0);
  CU_ASSERT_EQUAL(atomic_load(&a.pause_next), 0);
  CU_ASSERT_EQUAL(atomic_load(&a.pause_errors), 0);
  served += 1;
  served += ad_paused_round(l, &a, port, 1, 300);

  /* Paused from the test's thread, the listener idle. */
  for (int r = 2; r < 2 + AD_ROUNDS; r++) {
    CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
    served += ad_paused_round(l, &a, port, r, 100 * (r + 2));
  }
  /* The first connection, open throughout, is still served. */
  if (fd >= 0) {
    CU_ASSERT_EQUAL(ad_exchange(fd, 201), 0);
    close(fd);
  }
  CU_ASSERT(util_wait_flag(&a.echo.closed, served, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), served);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  st_io_destroy(&c);
}

/* Connections already waiting when the accept callback pauses: the one it
 * runs for, and at most one an accept in progress had taken, get the
 * callback; the others wait for the resume. */
static void test_pause_in_callback_queued(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, 0, &lfd, &port);
  if (!l) return;
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
  st_io_run(&c);
  int fds[AD_K];
  for (int i = 0; i < AD_K; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT(fds[i] >= 0);
    if (fds[i] >= 0) CU_ASSERT_EQUAL(ad_send_tag(fds[i], i), 0);
  }
  util_sleep_ms(AD_SETTLE_MS);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 0);
  atomic_store(&a.pause_next, 1);
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0);
  CU_ASSERT(util_wait_flag(&a.echo.accepted, 1, 10000));
  util_sleep_ms(AD_SETTLE_MS);
  int got = atomic_load(&a.echo.accepted);
  if (got > 2) printf("(%d of %d accepted after the pause) ", got, AD_K);
  CU_ASSERT(got <= 2);
  CU_ASSERT_EQUAL(atomic_load(&a.pause_errors), 0);
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0);
  CU_ASSERT(util_wait_flag(&a.echo.accepted, AD_K, 10000));
  for (int i = 0; i < AD_K; i++)
    if (fds[i] >= 0) {
      CU_ASSERT_EQUAL(ad_expect_tag(fds[i], i), 0);
      close(fds[i]);
    }
  CU_ASSERT(util_wait_flag(&a.echo.closed, AD_K, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), AD_K);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  st_io_destroy(&c);
}

/* A thread pausing and resuming l until told to stop; it leaves it
 * resumed. */
struct toggler {
  taxi_listener_t *l;
  atomic_int stop, rounds, errors;
};

static void toggle_main(void *arg) {
  struct toggler *t = arg;
  unsigned n = 0;
  while (!atomic_load(&t->stop)) {
    if (taxi_listener_pause(t->l) != 0) atomic_fetch_add(&t->errors, 1);
    if (n % 2) util_sleep_ms(1);
    if (taxi_listener_resume(t->l) != 0) atomic_fetch_add(&t->errors, 1);
    if (n % 3 == 0) util_sleep_ms(1);
    n++;
    atomic_fetch_add(&t->rounds, 1);
  }
}

enum { AD_TOGGLE_CLIENTS = 120 };

static void test_pause_resume_threads(void) {
  st_io_t c;
  static struct ad a;
  static struct toggler t;
  memset(&t, 0, sizeof t);
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, 0, &lfd, &port);
  if (!l) return;
  st_io_run(&c);
  t.l = l;
  util_thread_t th;
  CU_ASSERT_FATAL(util_thread_start(&th, toggle_main, &t) == 0);
  /* The clients come while the toggler runs: on a loaded machine it may
   * not have been scheduled yet. */
  CU_ASSERT(util_wait_flag(&t.rounds, 1, 10000));
  /* Every other client waits for its echo at once (served in a resumed
   * moment); the others send and wait for theirs at the end. */
  static int fds[AD_TOGGLE_CLIENTS];
  int failed = 0;
  for (int i = 0; i < AD_TOGGLE_CLIENTS; i++) {
    fds[i] = st_connect(port);
    if (fds[i] < 0) {
      failed++;
      continue;
    }
    if (i % 2 == 0) {
      if (ad_exchange(fds[i], i) != 0) failed++;
      close(fds[i]);
      fds[i] = -1;
    } else if (ad_send_tag(fds[i], i) != 0) {
      failed++;
    }
  }
  atomic_store(&t.stop, 1);
  util_thread_join(&th, 10000, "the pausing and resuming thread");
  CU_ASSERT_EQUAL(atomic_load(&t.errors), 0);
  CU_ASSERT(atomic_load(&t.rounds) > 0);
  for (int i = 0; i < AD_TOGGLE_CLIENTS; i++)
    if (fds[i] >= 0) {
      if (ad_expect_tag(fds[i], i) != 0) failed++;
      close(fds[i]);
    }
  if (failed) printf("(%d clients not served) ", failed);
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT(util_wait_flag(&a.echo.closed, AD_TOGGLE_CLIENTS, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), AD_TOGGLE_CLIENTS);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  st_io_destroy(&c);
}

/* ---- a socket shared with the application's accepts ------------------------
 */

enum { AD_SHARED = 40 };

static void test_shared_socket(void) {
  st_io_t c;
  static struct ad a;
  int port, lfd;
  taxi_listener_t *l = ad_start(&c, &a, TAXI_LISTEN_KEEP_SOCKET, &lfd, &port);
  if (!l) return;
  st_io_run(&c);
  ad_serve_one(port, 0);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 1);

  /* Paused: the application takes the next connection itself. */
  CU_ASSERT_EQUAL(taxi_listener_pause(l), 0);
  int cfd = st_connect(port);
  CU_ASSERT(cfd >= 0);
  int mine = cfd >= 0 ? ad_accept(lfd, 10000) : -1;
  CU_ASSERT(mine >= 0);
  if (mine >= 0) {
    CU_ASSERT_EQUAL(ad_send_tag(cfd, 1), 0);
    CU_ASSERT_EQUAL(ad_expect_tag(mine, 1), 0);
    CU_ASSERT_EQUAL(ad_send_tag(mine, 2), 0);
    CU_ASSERT_EQUAL(ad_expect_tag(cfd, 2), 0);
    close(mine);
  }
  if (cfd >= 0) close(cfd);
  /* One more queued while paused, then resumed: the listener takes it
   * and the next ones. */
  int q = st_connect(port);
  CU_ASSERT(q >= 0);
  if (q >= 0) CU_ASSERT_EQUAL(ad_send_tag(q, 3), 0);
  util_sleep_ms(AD_SETTLE_MS);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 1);
  CU_ASSERT_EQUAL(taxi_listener_resume(l), 0);
  if (q >= 0) {
    CU_ASSERT_EQUAL(ad_expect_tag(q, 3), 0);
    close(q);
  }
  for (int i = 0; i < 3; i++) {
    ad_serve_one(port, 4 + i);
  }
  CU_ASSERT(util_wait_flag(&a.echo.closed, 5, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted), 5);

  /* Both accepting at once, the listener running: each connection goes
   * to one of them, and is served by it; none is lost. */
  static int clients[AD_SHARED], taken[AD_SHARED];
  int ntaken = 0, failed = 0;
  int base = atomic_load(&a.echo.accepted);
  for (int i = 0; i < AD_SHARED; i++) {
    clients[i] = st_connect(port);
    if (clients[i] < 0) {
      failed++;
      continue;
    }
    if (ad_send_tag(clients[i], 100 + i) != 0) failed++;
    int t = ad_accept(lfd, 0); /* one try, no wait */
    if (t >= 0) taken[ntaken++] = t;
  }
  /* The application's own: read the client's message, send it back. */
  for (int k = 0; k < ntaken; k++) {
    char got[AD_TAG];
    if (net_recv_all(taken[k], got, AD_TAG) != 0 ||
        net_send_all(taken[k], got, AD_TAG) != 0)
      failed++;
  }
  for (int i = 0; i < AD_SHARED; i++)
    if (clients[i] >= 0) {
      if (ad_expect_tag(clients[i], 100 + i) != 0) failed++;
      close(clients[i]);
    }
  for (int k = 0; k < ntaken; k++) close(taken[k]);
  if (failed) printf("(%d clients not served) ", failed);
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT(util_wait_flag(&a.echo.accepted, base + AD_SHARED - ntaken, 10000));
  util_sleep_ms(AD_SETTLE_MS);
  CU_ASSERT_EQUAL(atomic_load(&a.echo.accepted) + ntaken, base + AD_SHARED);

  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  CU_ASSERT(util_wait_flag(&a.on_close, 1, 10000));
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(close(lfd), 0);
}

CU_TestInfo st_tests_adopt[] = {
    {"adopt: a listening socket's clients accepted and served",
     test_adopt_accepts},
    {"adopt: bad input refused, the socket left open", test_adopt_bad_input},
    {"adopt: KEEP_SOCKET leaves the socket listening, its queue intact",
     test_keep_socket},
    {"adopt: without KEEP_SOCKET the listener closes the socket",
     test_socket_closed_without_keep},
    {"pause/resume: nothing accepted while paused, everything after",
     test_pause_resume},
    {"pause in the accept callback, connections queued: they wait",
     test_pause_in_callback_queued},
    {"pause/resume from another thread: every client served",
     test_pause_resume_threads},
    {"adopt: a socket shared with the application's accepts",
     test_shared_socket},
    CU_TEST_INFO_NULL,
};
