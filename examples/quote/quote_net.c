/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote_net.c - the operating-system side of quote_net.h, written once for
 * POSIX and Winsock; the few differences are the #if blocks.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include "quote_net.h"

#include <stdlib.h>
#include <string.h>

#include "../echo_common.h"

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>
typedef WSAPOLLFD pollfd_t;
#define poll_fn(f, n, t) WSAPoll((f), (ULONG)(n), (t))
#define SHUT_BOTH SD_BOTH
#else
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
typedef struct pollfd pollfd_t;
#define poll_fn(f, n, t) poll((f), (nfds_t)(n), (t))
#define SHUT_BOTH SHUT_RDWR
#endif

int quote_set_blocking(taxi_handle_t s) {
#if defined(_WIN32)
  u_long off = 0;
  return ioctlsocket(s, FIONBIO, &off) == 0 ? 0 : -1;
#else
  int flags = fcntl(s, F_GETFL);
  if (flags == -1 || fcntl(s, F_SETFL, flags & ~O_NONBLOCK) == -1) return -1;
  return 0;
#endif
}

void quote_shutdown(taxi_handle_t s) { (void)shutdown(s, SHUT_BOTH); }

struct quote_poll {
  size_t capacity;
  pollfd_t set[];
};

struct quote_poll *quote_poll_new(size_t capacity) {
  struct quote_poll *p =
      malloc(sizeof *p + (capacity ? capacity : 1) * sizeof(pollfd_t));
  if (p) p->capacity = capacity;
  return p;
}

void quote_poll_free(struct quote_poll *p) { free(p); }

int quote_poll_wait(struct quote_poll *p, const taxi_handle_t *fds, size_t n,
                    int timeout_ms, unsigned char *ready, const char **what) {
  int rc;
  if (n > p->capacity) {
    *what = "poll: more sockets than room";
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    p->set[i].fd = fds[i];
    p->set[i].events = POLLIN;
    p->set[i].revents = 0;
  }
  rc = poll_fn(p->set, n, timeout_ms);
  if (rc < 0) {
#if !defined(_WIN32)
    if (errno == EINTR) rc = 0;
#endif
    if (rc < 0) {
      *what = "poll failed";
      return -1;
    }
  }
  for (size_t i = 0; i < n; i++) ready[i] = p->set[i].revents != 0;
  return rc;
}

int quote_wait_readable(taxi_handle_t s, int timeout_ms) {
  pollfd_t one;
  int rc;
  one.fd = s;
  one.events = POLLIN;
  one.revents = 0;
  rc = poll_fn(&one, 1, timeout_ms);
  return rc > 0 ? 1 : rc;
}

int quote_pair(taxi_handle_t out[2]) {
#if defined(_WIN32)
  /* No socketpair: a loopback connection to a listener made for it. */
  taxi_handle_t l, a;
  char bound[64];
  unsigned port;
  if (echo_listen("127.0.0.1", 0, &l, bound, sizeof bound, &port) != 0)
    return -1;
  if (echo_connect("127.0.0.1", port, &out[0]) != 0) {
    echo_close(l);
    return -1;
  }
  while (quote_wait_readable(l, 1000) == 1) {
    if (echo_accept(l, &a) == ECHO_IO_OK) {
      out[1] = a;
      echo_close(l);
      return 0;
    }
  }
  echo_close(out[0]);
  echo_close(l);
  return -1;
#else
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    out[i] = sv[i];
    if (echo_set_nonblocking(sv[i]) != 0 ||
        fcntl(sv[i], F_SETFD, FD_CLOEXEC) == -1) {
      close(sv[0]);
      close(sv[1]);
      return -1;
    }
  }
  return 0;
#endif
}

static void (*stop_fn)(void);

#if defined(_WIN32)
static BOOL WINAPI on_console(DWORD type) {
  (void)type;
  if (stop_fn) stop_fn();
  return TRUE; /* handled: the process is not ended for us */
}

int quote_on_stop(void (*fn)(void)) {
  stop_fn = fn;
  return SetConsoleCtrlHandler(on_console, TRUE) ? 0 : -1;
}
#else
static void on_signal(int signo) {
  int saved = errno; /* whatever the interrupted code was about to read */
  (void)signo;
  if (stop_fn) stop_fn();
  errno = saved;
}

int quote_on_stop(void (*fn)(void)) {
  static const int signals[] = {SIGINT, SIGTERM};
  struct sigaction sa;
  stop_fn = fn;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: blocked calls return EINTR */
  for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
    if (sigaction(signals[i], &sa, NULL) != 0) return -1;
  return 0;
}
#endif
