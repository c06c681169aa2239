/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.c - the command line, listening socket and signals of the peer echo
 * servers (see peer.h).
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

volatile sig_atomic_t peer_stopping;

static void usage(FILE *out, const char *name, unsigned max_threads) {
  fprintf(out, "usage: %s --port P [--host ADDR]%s\n", name,
          max_threads ? " [--threads N]" : "");
}

static int parse_unsigned(const char *text, unsigned long max, unsigned *out) {
  char *end;
  unsigned long v;
  errno = 0;
  v = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v > max || text[0] == '-')
    return -1;
  *out = (unsigned)v;
  return 0;
}

void peer_parse(int argc, char **argv, const char *name,
                unsigned default_threads, unsigned max_threads,
                struct peer_options *o) {
  int i, have_port = 0;
  o->name = name;
  o->host = "127.0.0.1";
  o->port = 0;
  o->threads = default_threads;
  for (i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout, name, max_threads);
      exit(0);
    }
    if (i + 1 >= argc) break; /* every other option takes a value */
    if (strcmp(arg, "--port") == 0) {
      if (parse_unsigned(argv[++i], 65535, &o->port) < 0) break;
      have_port = 1;
    } else if (strcmp(arg, "--host") == 0) {
      o->host = argv[++i];
    } else if (strcmp(arg, "--threads") == 0 && max_threads > 0) {
      if (parse_unsigned(argv[++i], max_threads, &o->threads) < 0 ||
          o->threads == 0)
        break;
    } else {
      break;
    }
  }
  if (i < argc || !have_port) {
    if (i < argc) fprintf(stderr, "%s: bad argument '%s'\n", name, argv[i]);
    usage(stderr, name, max_threads);
    exit(2);
  }
}

void peer_raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl); /* best effort: it is a ceiling */
  }
}

void peer_error(const struct peer_options *o, const char *what, int err) {
  fprintf(stderr, "%s: %s: %s\n", o->name, what, strerror(err));
}

/* A socket of `type` bound to o->host:o->port (SO_REUSEADDR; a stream
 * socket listening), non-blocking and close-on-exec, and the "listening
 * on" line printed.  Exits 1 with a message on failure. */
static int bound_socket(const struct peer_options *o, int type) {
  struct addrinfo hints, *res, *ai;
  struct sockaddr_storage addr;
  socklen_t len = sizeof addr;
  char host[128], port[16];
  int fd = -1, on = 1, rc, err = 0;

  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = type;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  snprintf(port, sizeof port, "%u", o->port);
  rc = getaddrinfo(o->host, port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "%s: %s: %s\n", o->name, o->host, gai_strerror(rc));
    exit(1);
  }
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        (type != SOCK_STREAM || listen(fd, SOMAXCONN) == 0) &&
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 &&
        fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
      break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    peer_error(o, type == SOCK_STREAM ? "listen" : "bind", err);
    exit(1);
  }
  if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0 ||
      getnameinfo((struct sockaddr *)&addr, len, host, sizeof host, port,
                  sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    peer_error(o, "getsockname", errno);
    exit(1);
  }
  printf(addr.ss_family == AF_INET6 ? "%s: listening on [%s]:%s\n"
                                    : "%s: listening on %s:%s\n",
         o->name, host, port);
  fflush(stdout);
  return fd;
}

int peer_listen(const struct peer_options *o) {
  return bound_socket(o, SOCK_STREAM);
}

int peer_udp_bind(const struct peer_options *o) {
  return bound_socket(o, SOCK_DGRAM);
}

void peer_nodelay(int fd) {
  int on = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

static void on_stop_signal(int signo) {
  (void)signo;
  peer_stopping = 1;
}

void peer_catch_stop_signals(sigset_t *wait_mask) {
  struct sigaction sa;
  sigset_t stop;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal; /* no SA_RESTART: the wait must return */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, wait_mask);
  sigdelset(wait_mask, SIGINT);
  sigdelset(wait_mask, SIGTERM);
}

void peer_report_stop(const struct peer_options *o,
                      unsigned long long connections) {
  printf("%s: stopped after %llu connections\n", o->name, connections);
  fflush(stdout);
}
