/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/apr_port/client.c - drives either server with the same requests
 * and prints the answers, so that two servers can be compared with diff.
 *
 *     apr_port_client --port P [--host 127.0.0.1] [--connections N] < requests
 *
 * It reads the requests from standard input, opens N connections at once
 * (default 4), sends every request on each from its own thread, closes the
 * sending side, reads the answers until the server closes, and prints them
 * connection by connection:
 *
 *     [0] PONG
 *     [0] ...
 *     [1] PONG
 *
 * Plain POSIX sockets: the client is the same for both servers and knows
 * nothing of APR or taxi.  Exit status 0, 1 on a failure, 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 64

struct conn {
  pthread_t thread;
  int index;
  char *answers;
  size_t len;
  int failed;
};

static const char *host = "127.0.0.1";
static int port = -1;
static char *requests;
static size_t requests_len;

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void *talk(void *arg) {
  struct conn *c = arg;
  struct sockaddr_in sa;
  struct timeval tv = {30, 0}; /* never wait for ever on a broken server */
  size_t cap = 4096;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  c->failed = 1;
  if (fd < 0) return NULL;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      write_all(fd, requests, requests_len) != 0 ||
      shutdown(fd, SHUT_WR) != 0 || !(c->answers = malloc(cap))) {
    close(fd);
    return NULL;
  }
  for (;;) {
    if (c->len == cap) {
      char *more = realloc(c->answers, cap * 2);
      if (!more) break;
      c->answers = more;
      cap *= 2;
    }
    ssize_t n = read(fd, c->answers + c->len, cap - c->len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (n == 0) {
      c->failed = 0;
      break;
    }
    c->len += (size_t)n;
  }
  close(fd);
  return NULL;
}

static int usage(void) {
  fprintf(stderr,
          "usage: apr_port_client --port P [--host H] [--connections N] "
          "< requests\n");
  return 2;
}

int main(int argc, char **argv) {
  struct conn conns[MAX_CONNECTIONS];
  int n = 4, rc = 0;
  size_t cap = 4096;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) return usage();
    if (strcmp(argv[i], "--port") == 0)
      port = atoi(argv[++i]);
    else if (strcmp(argv[i], "--host") == 0)
      host = argv[++i];
    else if (strcmp(argv[i], "--connections") == 0)
      n = atoi(argv[++i]);
    else
      return usage();
  }
  if (port <= 0 || port > 65535 || n < 1 || n > MAX_CONNECTIONS) return usage();
  requests = malloc(cap);
  for (;;) {
    if (!requests) return 1;
    size_t got = fread(requests + requests_len, 1, cap - requests_len, stdin);
    requests_len += got;
    if (requests_len < cap) break;
    cap *= 2;
    requests = realloc(requests, cap);
  }
  memset(conns, 0, sizeof conns);
  for (int i = 0; i < n; i++) {
    conns[i].index = i;
    if (pthread_create(&conns[i].thread, NULL, talk, &conns[i]) != 0) {
      fprintf(stderr, "apr_port_client: cannot start a thread\n");
      return 1;
    }
  }
  for (int i = 0; i < n; i++) pthread_join(conns[i].thread, NULL);
  for (int i = 0; i < n; i++) {
    const char *p = conns[i].answers, *end = p + conns[i].len;
    if (conns[i].failed) {
      fprintf(stderr, "apr_port_client: connection %d failed\n", i);
      rc = 1;
    }
    while (p && p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
      printf("[%d] %.*s\n", i, (int)len, p);
      p += len + 1;
    }
    free(conns[i].answers);
  }
  free(requests);
  return rc;
}
