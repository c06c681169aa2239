/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - the web load generator's clients: each loops connect, send
 * `GET /path HTTP/1.1`, read the status line and headers, read the body
 * checking every byte against the file in memory, then wait for the
 * server's close (Connection: close) or reuse the connection
 * (--keep-alive, when the response allows it).  A thread drives its
 * clients, non-blocking, from one epoll set (net.c), so a thousand clients
 * need no thousand threads.
 *
 * With Connection: close the client waits for the server's end of file
 * before it closes: the server closes first, so the TIME_WAIT states stay on
 * its side and the client's ephemeral ports do not run out; the paper's
 * timer also stops "just after the connection is closed at the client end".
 *
 * A request on a kept-alive connection that the server closed before
 * answering is sent again on a new connection (counted as a reconnect, not
 * an error), as browsers do.  Every other failure is an error of one kind
 * (webstone.h); the client then waits 10 ms and starts its next request.
 *
 * With --tls a connection makes its TLS handshake (tls.c) once connected,
 * and then moves its bytes through it; a TLS failure is an error of kind
 * other.  The handshake is part of its request's time, as the connect is.
 */
#include "webstone.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HDR_MAX 4096
#define RECV_BUF (64 * 1024)
#define RECV_ROUNDS 4 /* reads per readiness event, then the others' turn */
#define RETRY_DELAY_NS (10 * WS_NSEC_PER_MSEC)
#define TICK_MS 10
#define MAX_ERROR_REPORTS 10

atomic_int ws_phase;
atomic_llong ws_quota;
atomic_llong ws_finished;
atomic_int ws_error_reports;

enum cstate {
  C_IDLE,       /* nothing in flight; start the next request */
  C_WAIT,       /* after an error, until resume_at */
  C_DONE,       /* --requests: its share is done */
  C_CONNECTING, /* connect in progress */
  C_HANDSHAKE,  /* --tls: the handshake in progress */
  C_SENDING,    /* the request is partly sent */
  C_HEAD,       /* reading the status line and headers */
  C_BODY,       /* reading the body */
  C_EOF         /* the body is complete; waiting for the server's close */
};

struct ws_client {
  int fd;
  long id;
  enum cstate state;
  int watching;  /* the WS_EV_ flags the poller has for fd; -1: not added */
  int reused;    /* the request went out on a kept-alive connection */
  int counted;   /* --requests: started within the quota */
  int keep;      /* the response lets the connection be reused */
  int got_any;   /* a byte of the response arrived */
  void *tls;     /* --tls: the connection's TLS state, or NULL */
  void *session; /* --tls-resume: the last connection's session */
  int want;      /* --tls: the readiness the last -EAGAIN waits for */
  const struct ws_file *file;
  uint64_t rng;
  int64_t t_start, t_first, t_last, t_progress, resume_at;
  size_t req_len, req_sent, hdr_len, body;
  long long content_length; /* -1: not given */
  uint64_t resp_bytes;
  char req[160];
  char hdr[HDR_MAX];
};

struct thread_private {
  unsigned char buf[RECV_BUF];
  int phase; /* ws_phase as seen at the top of the loop */
};

static char host_header[300];

static int counting(const struct ws_thread *t, const struct ws_client *c) {
  (void)t;
  return ws_opt.requests > 0 ? c->counted
                             : atomic_load(&ws_phase) == WS_MEASURE;
}

static void report(const struct ws_client *c, const char *fmt,
                   const char *detail) {
  if (atomic_fetch_add(&ws_error_reports, 1) >= MAX_ERROR_REPORTS) return;
  fprintf(stderr, "webstone: client %ld, %s: ", c->id,
          c->file ? c->file->path : "-");
  fprintf(stderr, fmt, detail);
  fputc('\n', stderr);
}

static void drop_connection(struct ws_client *c) {
  ws_tls_end(c->tls, ws_opt.tls_resume ? &c->session : NULL);
  c->tls = NULL;
  ws_net_close(c->fd);
  c->fd = -1;
  c->watching = -1;
}

static void fail(struct ws_thread *t, struct ws_client *c, enum ws_error kind,
                 const char *fmt, const char *detail) {
  if (atomic_load(&ws_phase) != WS_STOP) {
    t->st->errors[kind]++;
    report(c, fmt, detail);
  }
  if (ws_opt.requests > 0 && c->counted) atomic_fetch_add(&ws_finished, 1);
  c->counted = 0;
  drop_connection(c);
  c->state = C_WAIT;
  c->resume_at = ws_now_ns() + RETRY_DELAY_NS;
}

static void fail_errno(struct ws_thread *t, struct ws_client *c,
                       const char *what, int err) {
  enum ws_error kind = WS_ERR_OTHER;
  if (err == ECONNREFUSED)
    kind = WS_ERR_REFUSED;
  else if (err == ECONNRESET || err == EPIPE || err == ECONNABORTED)
    kind = WS_ERR_RESET;
  fail(t, c, kind, what, strerror(err));
}

static int watch(struct ws_thread *t, struct ws_client *c, int flags) {
  int rc;
  if (c->watching == flags) return 0;
  rc = ws_poller_watch(t->poller, c->fd, c->watching < 0, flags,
                       (uint32_t)(c - t->clients));
  if (rc < 0) {
    fail_errno(t, c, "epoll_ctl: %s", -rc);
    return -1;
  }
  c->watching = flags;
  return 0;
}

static void start(struct ws_thread *t, struct ws_client *c, int64_t now,
                  int again);

/* The connection's bytes, through TLS with --tls; -EAGAIN leaves in
 * c->want what to wait for. */
static ssize_t conn_send(struct ws_client *c, const void *buf, size_t len) {
  c->want = WS_EV_OUT;
  return c->tls ? ws_tls_send(c->tls, buf, len, &c->want)
                : ws_net_send(c->fd, buf, len);
}

static ssize_t conn_recv(struct ws_client *c, void *buf, size_t len) {
  c->want = WS_EV_IN;
  return c->tls ? ws_tls_recv(c->tls, buf, len, &c->want)
                : ws_net_recv(c->fd, buf, len);
}

static void send_request(struct ws_thread *t, struct ws_client *c) {
  while (c->req_sent < c->req_len) {
    ssize_t n = conn_send(c, c->req + c->req_sent, c->req_len - c->req_sent);
    if (n == -EAGAIN) {
      c->state = C_SENDING;
      (void)watch(t, c, c->want);
      return;
    }
    if (n < 0) {
      if (c->reused) { /* the server closed the idle connection */
        t->st->reconnects++;
        drop_connection(c);
        start(t, c, ws_now_ns(), 1);
        return;
      }
      fail_errno(t, c, "send: %s", (int)-n);
      return;
    }
    c->req_sent += (size_t)n;
  }
  c->state = C_HEAD;
  (void)watch(t, c, WS_EV_IN);
}

/* --tls: the handshake's next step; once done, the request. */
static void handshake(struct ws_thread *t, struct ws_client *c) {
  int rc;
  if (c->tls == NULL && (c->tls = ws_tls_begin(c->fd, c->session)) == NULL) {
    fail(t, c, WS_ERR_OTHER, "tls: %s", "out of memory");
    return;
  }
  rc = ws_tls_handshake(c->tls, &c->want);
  if (rc == -EAGAIN) {
    c->state = C_HANDSHAKE;
    (void)watch(t, c, c->want);
    return;
  }
  if (rc < 0) {
    fail(t, c, WS_ERR_OTHER, "tls handshake: %s",
         rc == -EPROTO ? "refused by TLS" : strerror(-rc));
    return;
  }
  if (counting(t, c)) {
    t->st->handshakes++;
    t->st->resumed += ws_tls_resumed(c->tls) ? 1 : 0;
  }
  send_request(t, c);
}

/* The connection is made: TLS first with --tls. */
static void connected(struct ws_thread *t, struct ws_client *c) {
  if (ws_opt.tls)
    handshake(t, c);
  else
    send_request(t, c);
}

/* Begin a request: a new file unless `again` (the same request resent on a
 * new connection). */
static void start(struct ws_thread *t, struct ws_client *c, int64_t now,
                  int again) {
  int done = 0, len;
  if (!again) {
    int phase = atomic_load(&ws_phase);
    if (phase == WS_STOP) return;
    c->counted = 0;
    if (ws_opt.requests > 0 && phase == WS_MEASURE) {
      if (atomic_fetch_sub(&ws_quota, 1) <= 0) {
        c->state = C_DONE;
        return;
      }
      c->counted = 1;
    }
    c->file = ws_docroot_pick(t->docroot, &c->rng);
    len =
        snprintf(c->req, sizeof c->req, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
                 c->file->path, host_header,
                 ws_opt.keep_alive ? "" : "Connection: close\r\n");
    c->req_len = (size_t)len;
    c->t_start = now;
  }
  c->req_sent = c->hdr_len = c->body = 0;
  c->got_any = c->keep = 0;
  c->content_length = -1;
  c->resp_bytes = 0;
  c->t_progress = now;
  if (c->fd >= 0) {
    c->reused = 1;
    send_request(t, c);
    return;
  }
  c->reused = 0;
  c->fd = ws_net_connect(t->address, &done);
  if (c->fd < 0) {
    int err = -c->fd;
    c->fd = -1;
    fail_errno(t, c, "connect: %s", err);
    return;
  }
  c->watching = -1;
  if (counting(t, c)) t->st->connects++;
  if (done) {
    connected(t, c);
  } else {
    c->state = C_CONNECTING;
    (void)watch(t, c, WS_EV_OUT);
  }
}

/* The request is over (body complete, connection closed or kept). */
static void finish(struct ws_thread *t, struct ws_client *c, int64_t now) {
  if (counting(t, c)) {
    struct ws_stats *s = t->st;
    int64_t span = now > c->t_start ? now - c->t_start : 1;
    s->requests++;
    hist_record(&s->first_byte, (uint64_t)(c->t_first - c->t_start));
    hist_record(&s->last_byte, (uint64_t)(c->t_last - c->t_start));
    s->rate_sum += (double)c->resp_bytes * 8.0 * 1e9 / (double)span;
    s->last_done = now;
    if (ws_opt.requests > 0) atomic_fetch_add(&ws_finished, 1);
  } else if (atomic_load(&ws_phase) == WS_WARMUP) {
    t->st->warmup_requests++;
  }
  c->counted = 0;
  c->state = C_IDLE;
}

static void body_complete(struct ws_thread *t, struct ws_client *c,
                          int64_t now) {
  c->t_last = now;
  if (c->keep) {
    finish(t, c, now);
    start(t, c, now, 0);
  } else {
    c->state = C_EOF;
  }
}

/* Body bytes: each must be the file's byte at its offset. */
static int take_body(struct ws_thread *t, struct ws_client *c,
                     const unsigned char *p, size_t n, int64_t now) {
  const struct ws_file *f = c->file;
  if (n == 0) return 0;
  if (c->body + n > f->size) {
    fail(t, c, WS_ERR_WRONG, "wrong bytes: %s", "longer than the file");
    return -1;
  }
  if (memcmp(p, f->data + c->body, n) != 0) {
    char where[64];
    size_t i = 0;
    while (p[i] == f->data[c->body + i]) i++;
    snprintf(where, sizeof where, "byte %zu differs from the docroot's",
             c->body + i);
    fail(t, c, WS_ERR_WRONG, "wrong bytes: %s", where);
    return -1;
  }
  c->body += n;
  if (counting(t, c)) t->st->body_bytes += n;
  if (c->content_length >= 0 && c->body == (size_t)c->content_length)
    body_complete(t, c, now);
  return 0;
}

/* Does the comma-separated header value [v, v + n) hold `token`? */
static int has_token(const char *v, size_t n, const char *token) {
  size_t k = strlen(token), i;
  for (i = 0; i + k <= n; i++)
    if (strncasecmp(v + i, token, k) == 0 &&
        (i == 0 || v[i - 1] == ' ' || v[i - 1] == ',') &&
        (i + k == n || v[i + k] == ',' || v[i + k] == ' ' || v[i + k] == '\r'))
      return 1;
  return 0;
}

/* Parse the status line and headers in hdr[0, end).  0 or -1 (failed). */
static int parse_head(struct ws_thread *t, struct ws_client *c, size_t end) {
  char *line = c->hdr, *stop = c->hdr + end;
  int minor = -1, status = 0, keep_default, conn_close = 0, conn_keep = 0;
  char reason[48];
  if (sscanf(line, "HTTP/1.%d %d", &minor, &status) != 2 || minor < 0) {
    fail(t, c, WS_ERR_STATUS, "bad status: %s", "not an HTTP/1.x response");
    return -1;
  }
  if (status != 200) {
    snprintf(reason, sizeof reason, "%d", status);
    fail(t, c, WS_ERR_STATUS, "bad status: %s", reason);
    return -1;
  }
  keep_default = minor >= 1;
  while (line < stop) {
    char *eol = memchr(line, '\n', (size_t)(stop - line)), *colon, *v;
    size_t vlen;
    if (eol == NULL) eol = stop;
    colon = memchr(line, ':', (size_t)(eol - line));
    if (colon != NULL) {
      size_t nlen = (size_t)(colon - line);
      v = colon + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      vlen = (size_t)(eol - v);
      if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
        char *e;
        c->content_length = strtoll(v, &e, 10);
        if (e == v || c->content_length < 0) {
          fail(t, c, WS_ERR_STATUS, "bad status: %s", "bad Content-Length");
          return -1;
        }
      } else if (nlen == 17 &&
                 strncasecmp(line, "Transfer-Encoding", 17) == 0 &&
                 has_token(v, vlen, "chunked")) {
        fail(t, c, WS_ERR_STATUS, "bad status: %s",
             "a chunked body (a static file should have a Content-Length)");
        return -1;
      } else if (nlen == 10 && strncasecmp(line, "Connection", 10) == 0) {
        conn_close |= has_token(v, vlen, "close");
        conn_keep |= has_token(v, vlen, "keep-alive");
      }
    }
    line = eol + 1;
  }
  c->keep = ws_opt.keep_alive && c->content_length >= 0 && !conn_close &&
            (keep_default || conn_keep);
  if (c->content_length >= 0 && (size_t)c->content_length != c->file->size) {
    fail(t, c, WS_ERR_WRONG, "wrong bytes: %s",
         "Content-Length differs from the file's size");
    return -1;
  }
  c->state = C_BODY;
  return 0;
}

/* Header bytes; what follows the blank line goes to the body. */
static int take_head(struct ws_thread *t, struct ws_client *c,
                     const unsigned char *p, size_t n, int64_t now) {
  size_t from = c->hdr_len > 3 ? c->hdr_len - 3 : 0, room, i;
  room = HDR_MAX - 1 - c->hdr_len;
  if (n > room) n = room; /* what is cut is body, or the head is too long */
  memcpy(c->hdr + c->hdr_len, p, n);
  c->hdr_len += n;
  c->hdr[c->hdr_len] = '\0';
  for (i = from; i + 4 <= c->hdr_len; i++)
    if (memcmp(c->hdr + i, "\r\n\r\n", 4) == 0) {
      size_t end = i + 4, used = end - (c->hdr_len - n);
      if (parse_head(t, c, end) < 0) return -1;
      if (c->content_length == 0) body_complete(t, c, now);
      return (int)used; /* the caller feeds the rest of p to the body */
    }
  if (c->hdr_len == HDR_MAX - 1) {
    fail(t, c, WS_ERR_STATUS, "bad status: %s", "headers too long");
    return -1;
  }
  return (int)n;
}

static void on_eof(struct ws_thread *t, struct ws_client *c, int64_t now) {
  switch (c->state) {
    case C_EOF:
      drop_connection(c);
      finish(t, c, now);
      start(t, c, now, 0);
      return;
    case C_HEAD:
      if (c->reused && !c->got_any) {
        t->st->reconnects++;
        drop_connection(c);
        start(t, c, now, 1);
        return;
      }
      fail(t, c, WS_ERR_RESET, "reset: %s", "closed before the headers");
      return;
    default:
      if (c->content_length < 0 && c->body == c->file->size) {
        c->t_last = now;
        drop_connection(c);
        finish(t, c, now);
        start(t, c, now, 0);
        return;
      }
      fail(t, c, WS_ERR_SHORT, "short body: %s", "closed before its end");
  }
}

static void receive(struct ws_thread *t, struct ws_client *c) {
  struct thread_private *tp = (struct thread_private *)(void *)(t->st + 1);
  int round;
  for (round = 0; round < RECV_ROUNDS; round++) {
    ssize_t n = conn_recv(c, tp->buf, sizeof tp->buf);
    const unsigned char *p = tp->buf;
    int64_t now;
    if (n == -EAGAIN) {
      (void)watch(t, c, c->want); /* TLS may need to write first */
      return;
    }
    now = ws_now_ns();
    if (n < 0) {
      if (c->reused && !c->got_any && c->state == C_HEAD) {
        t->st->reconnects++;
        drop_connection(c);
        start(t, c, now, 1);
      } else {
        fail_errno(t, c, "recv: %s", (int)-n);
      }
      return;
    }
    if (n == 0) {
      on_eof(t, c, now);
      return;
    }
    c->t_progress = now;
    if (!c->got_any) {
      c->got_any = 1;
      c->t_first = now;
    }
    c->resp_bytes += (uint64_t)n;
    if (counting(t, c)) t->st->bytes += (uint64_t)n;
    if (c->state == C_EOF) {
      fail(t, c, WS_ERR_WRONG, "wrong bytes: %s", "more after the body");
      return;
    }
    if (c->state == C_HEAD) {
      int used = take_head(t, c, p, (size_t)n, now);
      if (used < 0) return;
      p += used;
      n -= used;
      if (c->state == C_HEAD || n == 0) continue;
    }
    if (c->state == C_BODY) {
      if (take_body(t, c, p, (size_t)n, now) < 0) return;
    } else if (n > 0 && c->state == C_EOF) {
      fail(t, c, WS_ERR_WRONG, "wrong bytes: %s", "more after the body");
      return;
    }
    if (c->state != C_HEAD && c->state != C_BODY && c->state != C_EOF)
      return; /* a new request started on a kept-alive connection */
  }
}

static void on_event(struct ws_thread *t, struct ws_client *c, int flags) {
  int err;
  switch (c->state) {
    case C_CONNECTING:
      err = ws_net_connect_result(c->fd);
      if (err != 0) {
        fail_errno(t, c, "connect: %s", err);
        return;
      }
      connected(t, c);
      return;
    case C_HANDSHAKE:
      handshake(t, c);
      return;
    case C_SENDING:
      send_request(t, c);
      return;
    case C_HEAD:
    case C_BODY:
    case C_EOF:
      if (flags & (WS_EV_IN | WS_EV_ERR)) receive(t, c);
      return;
    default:
      return;
  }
}

int ws_thread_init(struct ws_thread *t, long first, long n) {
  long i;
  if (strchr(ws_opt.host, ':') != NULL)
    snprintf(host_header, sizeof host_header, "[%s]:%s", ws_opt.host,
             ws_opt.port);
  else
    snprintf(host_header, sizeof host_header, "%s:%s", ws_opt.host,
             ws_opt.port);
  t->clients = calloc((size_t)n, sizeof *t->clients);
  /* The stats and the thread's receive buffer, in one block. */
  t->st = calloc(1, sizeof *t->st + sizeof(struct thread_private));
  t->nclients = n;
  t->poller = ws_poller_open();
  if (t->clients == NULL || t->st == NULL || t->poller < 0) {
    fprintf(stderr, "webstone: out of memory or descriptors\n");
    return -1;
  }
  for (i = 0; i < n; i++) {
    struct ws_client *c = &t->clients[i];
    c->fd = -1;
    c->watching = -1;
    c->id = first + i;
    c->rng = ws_opt.seed * UINT64_C(0x9E3779B97F4A7C15) +
             (uint64_t)(first + i + 1) * UINT64_C(0xBF58476D1CE4E5B9);
    if (c->rng == 0) c->rng = 1;
    c->state = C_IDLE;
  }
  return 0;
}

void ws_thread_free(struct ws_thread *t) {
  long i;
  for (i = 0; t->clients && i < t->nclients; i++) {
    ws_tls_end(t->clients[i].tls, NULL);
    ws_tls_forget(t->clients[i].session);
    ws_net_close(t->clients[i].fd);
  }
  free(t->clients);
  t->clients = NULL;
  ws_poller_close(t->poller);
  t->poller = -1;
}

void *ws_thread_main(void *arg) {
  struct ws_thread *t = arg;
  struct ws_event ev[256];
  int64_t timeout = (int64_t)(ws_opt.timeout * WS_NSEC_PER_SEC);
  long i;
  for (;;) {
    int64_t now = ws_now_ns();
    int n;
    if (atomic_load(&ws_phase) == WS_STOP) break;
    /* Start the idle, resume the waiting, time out the stuck. */
    for (i = 0; i < t->nclients; i++) {
      struct ws_client *c = &t->clients[i];
      if (c->state == C_IDLE || (c->state == C_WAIT && now >= c->resume_at))
        start(t, c, now, 0);
      else if (c->state >= C_CONNECTING && now - c->t_progress > timeout)
        fail(t, c, WS_ERR_TIMEOUT, "timeout: %s", "no progress");
    }
    n = ws_poller_wait(t->poller, ev, 256, TICK_MS);
    if (n < 0) {
      fprintf(stderr, "webstone: epoll_wait: %s\n", strerror(-n));
      t->st->errors[WS_ERR_OTHER]++;
      break;
    }
    for (i = 0; i < n; i++)
      if (ev[i].tag < (uint32_t)t->nclients)
        on_event(t, &t->clients[ev[i].tag], ev[i].flags);
  }
  {
    int64_t now = ws_now_ns();
    for (i = 0; i < t->nclients; i++) {
      const struct ws_client *c = &t->clients[i];
      if (c->state < C_CONNECTING) continue;
      t->st->unfinished++;
      if ((uint64_t)(now - c->t_start) > t->st->unfinished_max_ns)
        t->st->unfinished_max_ns = (uint64_t)(now - c->t_start);
    }
  }
  return NULL;
}
