/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/apr_port/common.c - options, listening socket and protocol of
 * the APR example server and its taxi port; see common.h.
 */
#include "common.h"

#include <apr_poll.h>
#include <apr_strings.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(const char *prog) {
  fprintf(stderr,
          "usage: %s --port P [--host 127.0.0.1] [--threads N] "
          "[--backend NAME] [--echo]\n",
          prog);
  return 2;
}

int port_parse(port_options_t *o, int argc, char **argv) {
  o->host = "127.0.0.1";
  o->port = -1;
  o->threads = 2;
  o->backend = NULL;
  o->echo = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end;
    if (strcmp(a, "--echo") == 0) {
      o->echo = 1;
      continue;
    }
    if (!v) return usage(o->prog);
    i++;
    if (strcmp(a, "--port") == 0) {
      long p = strtol(v, &end, 10);
      if (*end || p < 0 || p > 65535) return usage(o->prog);
      o->port = (int)p;
    } else if (strcmp(a, "--host") == 0) {
      o->host = v;
    } else if (strcmp(a, "--threads") == 0) {
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 256) return usage(o->prog);
      o->threads = (unsigned)n;
    } else if (strcmp(a, "--backend") == 0) {
      o->backend = v;
    } else {
      return usage(o->prog);
    }
  }
  return o->port < 0 ? usage(o->prog) : 0;
}

apr_status_t port_listen(apr_socket_t **out, apr_port_t *bound,
                         const port_options_t *o, apr_pool_t *pool) {
  apr_sockaddr_t *sa;
  apr_socket_t *s;
  apr_status_t st = apr_sockaddr_info_get(&sa, o->host, APR_INET,
                                          (apr_port_t)o->port, 0, pool);
  if (st == APR_SUCCESS)
    st = apr_socket_create(&s, sa->family, SOCK_STREAM, APR_PROTO_TCP, pool);
  if (st != APR_SUCCESS) return st;
  if ((st = apr_socket_opt_set(s, APR_SO_REUSEADDR, 1)) != APR_SUCCESS ||
      (st = apr_socket_bind(s, sa)) != APR_SUCCESS ||
      (st = apr_socket_listen(s, 128)) != APR_SUCCESS ||
      (st = apr_socket_timeout_set(s, 0)) != APR_SUCCESS ||
      (st = apr_socket_addr_get(&sa, APR_LOCAL, s)) != APR_SUCCESS) {
    apr_socket_close(s);
    return st;
  }
  *bound = sa->port;
  *out = s;
  return APR_SUCCESS;
}

apr_status_t port_send_all(apr_socket_t *s, const char *data, apr_size_t len) {
  while (len > 0) {
    apr_size_t n = len;
    apr_status_t st = apr_socket_send(s, data, &n);
    data += n;
    len -= n;
    if (APR_STATUS_IS_EAGAIN(st)) {
      apr_pollfd_t pfd = {0};
      apr_int32_t ready;
      pfd.desc_type = APR_POLL_SOCKET;
      pfd.reqevents = APR_POLLOUT;
      pfd.desc.s = s;
      st = apr_poll(&pfd, 1, &ready, apr_time_from_sec(10));
    }
    if (st != APR_SUCCESS) return st;
  }
  return APR_SUCCESS;
}

void port_session_init(port_session_t *s, int echo) {
  memset(s, 0, sizeof *s);
  s->echo = echo;
}

/* The answer to one complete request line (without its newline). */
static apr_status_t answer(port_session_t *s, apr_socket_t *sock) {
  char out[PORT_LINE_MAX + 64];
  const char *line = s->line, *arg = "";
  apr_size_t n;
  s->requests++;
  s->line[s->len] = '\0';
  const char *sp = strchr(line, ' ');
  size_t cmd = sp ? (size_t)(sp - line) : strlen(line);
  if (sp) arg = sp + 1;
#define IS(word) (cmd == sizeof word - 1 && memcmp(line, word, cmd) == 0)
  if (s->overflow) {
    n = (apr_size_t)snprintf(out, sizeof out, "ERR line too long\n");
  } else if (IS("PING") && !sp) {
    n = (apr_size_t)snprintf(out, sizeof out, "PONG\n");
  } else if (IS("ECHO")) {
    n = (apr_size_t)snprintf(out, sizeof out, "%s\n", arg);
  } else if (IS("UPPER")) {
    n = (apr_size_t)snprintf(out, sizeof out, "%s\n", arg);
    for (apr_size_t i = 0; i < n; i++)
      out[i] = (char)toupper((unsigned char)out[i]);
  } else if (IS("SUM")) {
    long long sum = 0;
    const char *p = arg;
    int bad = 0;
    while (*p) {
      char *end;
      errno = 0;
      long long v = strtoll(p, &end, 10);
      if (end == p || errno) {
        bad = 1;
        break;
      }
      sum += v;
      p = end;
      while (*p == ' ') p++;
    }
    n = bad ? (apr_size_t)snprintf(out, sizeof out, "ERR not a number\n")
            : (apr_size_t)snprintf(out, sizeof out, "%lld\n", sum);
  } else if (IS("COUNT") && !sp) {
    n = (apr_size_t)snprintf(out, sizeof out, "%lu\n", s->requests);
  } else {
    n = (apr_size_t)snprintf(out, sizeof out, "ERR unknown command\n");
  }
#undef IS
  s->len = 0;
  s->overflow = 0;
  return port_send_all(sock, out, n);
}

apr_status_t port_session_feed(port_session_t *s, const char *data,
                               apr_size_t n, apr_socket_t *sock) {
  if (s->echo) return port_send_all(sock, data, n);
  for (apr_size_t i = 0; i < n; i++) {
    char c = data[i];
    if (c == '\n') {
      if (s->len && s->line[s->len - 1] == '\r') s->len--;
      apr_status_t st = answer(s, sock);
      if (st != APR_SUCCESS) return st;
    } else if (s->len < PORT_LINE_MAX) {
      s->line[s->len++] = c;
    } else {
      s->overflow = 1;
    }
  }
  return APR_SUCCESS;
}
