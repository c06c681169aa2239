/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/http_session.c - one connection's HTTP logic (see
 * http_session.h): buffer, parse, look up, answer: 200, 206, 304, 416 and
 * the errors, with Date, Server, Content-Length and Connection, persistent
 * connections and pipelining.
 */
#include "http_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_log.h"
#include "http_parse.h"
#include "jaws_os.h"

/* Every request head fits (the parser's limits) with a read to spare. */
#define REQUEST_LINE_MAX 8192
#define HEADER_SECTION_MAX 16384
#define BUFFER_CAP (REQUEST_LINE_MAX + HEADER_SECTION_MAX + 2 + 10240)
#define HEAD_CAP 1024

struct http_session {
  struct jaws_server *srv;
  const struct http_sink_ops *ops;
  void *sink;
  struct http_parser parser;
  unsigned inflight;
  bool closing;
  int64_t head_started_ms; /* when this request's first byte came; -1 none */
  char peer[64];
  size_t len;
  /* The request bytes (BUFFER_CAP) and the parser's decoded path after
   * them: allocated when a request starts arriving and freed when no byte
   * of one is left, so an idle kept-alive connection costs little. */
  char *buf;
};

#define PATH_CAP (REQUEST_LINE_MAX + 1)

/* Give s its buffer, or false when out of memory. */
static bool get_buffer(struct http_session *s) {
  static const struct http_limits limits = {REQUEST_LINE_MAX,
                                            HEADER_SECTION_MAX, 100};
  if (s->buf) return true;
  if ((s->buf = malloc(BUFFER_CAP + PATH_CAP)) == NULL) return false;
  http_parser_init(&s->parser, &limits, s->buf + BUFFER_CAP, PATH_CAP);
  return true;
}

static void drop_buffer(struct http_session *s) {
  free(s->buf);
  s->buf = NULL;
}

struct http_session *http_session_new(struct jaws_server *srv,
                                      const struct http_sink_ops *ops,
                                      void *sink, const char *peer) {
  struct http_session *s = malloc(sizeof *s);
  if (s == NULL) return NULL;
  s->srv = srv;
  s->ops = ops;
  s->sink = sink;
  s->inflight = 0;
  s->closing = false;
  s->head_started_ms = -1;
  s->len = 0;
  snprintf(s->peer, sizeof s->peer, "%s", peer ? peer : "-");
  s->buf = NULL;
  return s;
}

void http_session_free(struct http_session *s) {
  if (s == NULL) return;
  drop_buffer(s);
  free(s);
}

size_t http_session_room(const struct http_session *s) {
  return s->closing ? BUFFER_CAP : BUFFER_CAP - s->len;
}

unsigned http_session_inflight(const struct http_session *s) {
  return s->inflight;
}

bool http_session_partial(const struct http_session *s) {
  return !s->closing && s->len > 0;
}

bool http_session_expired(const struct http_session *s, int64_t now_ms) {
  return !s->closing && s->head_started_ms >= 0 &&
         s->inflight == 0 && /* waiting for a response is not slow */
         now_ms - s->head_started_ms >= (int64_t)s->srv->cfg.header_timeout_ms;
}

void http_session_sent(struct http_session *s) {
  if (s->inflight) s->inflight--;
}

static const char *reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 416:
      return "Range Not Satisfiable";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Internal Server Error";
  }
}

/* The status line and the headers every answer has. */
static size_t head_start(char *h, int status, bool keep_alive, int version) {
  char date[32];
  const char *conn = !keep_alive     ? "Connection: close\r\n"
                     : version == 10 ? "Connection: keep-alive\r\n"
                                     : "";
  vfs_format_date(jaws_wall_s(), date);
  return (size_t)snprintf(h, HEAD_CAP,
                          "HTTP/1.1 %d %s\r\nServer: jaws\r\nDate: %s\r\n%s",
                          status, reason(status), date, conn);
}

/* The request line at the front of the buffer, for the log. */
static size_t request_line(const struct http_session *s) {
  const char *eol = memchr(s->buf, '\r', s->len);
  const char *lf = memchr(s->buf, '\n', s->len);
  if (lf && (!eol || lf < eol)) eol = lf;
  return eol ? (size_t)(eol - s->buf) : s->len;
}

/* Log, count and hand o to the sink; body: the body's bytes, for the log
 * (the file's range is dropped for HEAD). */
static int send_out(struct http_session *s, int status, struct http_out *o,
                    bool head_only, uint64_t body) {
  int rc;
  atomic_fetch_add(&s->srv->requests, 1);
  if (s->srv->log)
    access_log_add(s->srv->log, s->peer, s->buf, request_line(s), status,
                   head_only ? 0 : body);
  if (head_only && o->file) {
    vfs_release(o->file);
    o->file = NULL;
  }
  rc = s->ops->respond(s->sink, o);
  if (rc == 0) s->inflight++;
  if (rc < 0 || o->close) s->closing = true;
  return rc;
}

/* An error answer with a small HTML body (its length alone for HEAD);
 * keep_alive false for errors after which the stream cannot be trusted. */
static int send_error(struct http_session *s, int status, bool keep_alive,
                      int version, bool head_only) {
  char h[HEAD_CAP], body[128];
  int blen =
      snprintf(body, sizeof body, "<html><body><h1>%d %s</h1></body></html>\n",
               status, reason(status));
  size_t n = head_start(h, status, keep_alive, version);
  struct http_out o = {.head = h, .close = !keep_alive};
  n += (size_t)snprintf(h + n, HEAD_CAP - n,
                        "%sContent-Type: text/html; charset=utf-8\r\n"
                        "Content-Length: %d\r\n\r\n%s",
                        status == 405 ? "Allow: GET, HEAD\r\n" : "", blen,
                        head_only ? "" : body);
  o.head_len = n;
  return send_out(s, status, &o, head_only, (uint64_t)blen);
}

/* 301 to the directory's path with its slash: the decoded path encoded
 * again (only unreserved characters and '/' as they are), the query as
 * it came (the parser allows no controls in it). */
static int send_redirect(struct http_session *s, const struct http_request *req,
                         bool keep, bool head_only) {
  static const char hex[] = "0123456789ABCDEF";
  char h[HEAD_CAP], loc[HEAD_CAP / 2];
  size_t n = 0;
  for (const char *p = req->path; *p && n + 4 < sizeof loc; p++) {
    unsigned char c = (unsigned char)*p;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || strchr("/-._~", c)) {
      loc[n++] = (char)c;
    } else {
      loc[n++] = '%';
      loc[n++] = hex[c >> 4];
      loc[n++] = hex[c & 15];
    }
  }
  if (n + 2 + req->query_len >= sizeof loc || n + 4 >= sizeof loc)
    return send_error(s, 414, keep, req->version, head_only);
  loc[n++] = '/';
  if (req->query) {
    loc[n++] = '?';
    memcpy(loc + n, req->query, req->query_len);
    n += req->query_len;
  }
  loc[n] = '\0';
  n = head_start(h, 301, keep, req->version);
  n += (size_t)snprintf(h + n, HEAD_CAP - n,
                        "Location: %s\r\nContent-Length: 0\r\n\r\n", loc);
  struct http_out o = {.head = h, .head_len = n, .close = !keep};
  return send_out(s, 301, &o, head_only, 0);
}

/* Answer one parsed request. */
static int answer(struct http_session *s, const struct http_request *req) {
  char h[HEAD_CAP];
  struct vfs_file *f;
  bool keep = req->keep_alive && !atomic_load(&s->srv->stopping);
  bool head_only = req->method == HTTP_HEAD;
  int status = vfs_lookup(s->srv->vfs, req->path, &f);
  struct http_out o = {.head = h, .close = !keep};
  size_t n;

  if (status == 301) return send_redirect(s, req, keep, head_only);
  if (status != 0) return send_error(s, status, keep, req->version, head_only);
  if (req->has_if_modified_since && f->mtime <= req->if_modified_since) {
    n = head_start(h, 304, keep, req->version);
    n += (size_t)snprintf(h + n, HEAD_CAP - n, "%.*s\r\n", (int)f->meta_len,
                          f->meta);
    o.head_len = n;
    vfs_release(f);
    return send_out(s, 304, &o, true, 0);
  }
  status = 200;
  o.off = 0;
  o.len = f->size;
  if (req->range.kind != HTTP_RANGE_NONE) {
    uint64_t first, last;
    if (req->range.kind == HTTP_RANGE_FROM) {
      first = req->range.first;
      last = req->range.last < f->size ? req->range.last : f->size - 1;
    } else {
      first = req->range.suffix < f->size ? f->size - req->range.suffix : 0;
      last = f->size - 1;
    }
    if (f->size == 0 || first >= f->size ||
        (req->range.kind == HTTP_RANGE_SUFFIX && req->range.suffix == 0)) {
      char extra[64];
      snprintf(extra, sizeof extra, "bytes */%llu",
               (unsigned long long)f->size);
      n = head_start(h, 416, keep, req->version);
      n += (size_t)snprintf(h + n, HEAD_CAP - n,
                            "Content-Range: %s\r\nContent-Length: 0\r\n\r\n",
                            extra);
      o.head_len = n;
      vfs_release(f);
      return send_out(s, 416, &o, true, 0);
    }
    status = 206;
    o.off = first;
    o.len = last - first + 1;
  }
  n = head_start(h, status, keep, req->version);
  n += (size_t)snprintf(h + n, HEAD_CAP - n, "%.*s", (int)f->meta_len, f->meta);
  if (status == 206)
    n += (size_t)snprintf(
        h + n, HEAD_CAP - n, "Content-Range: bytes %llu-%llu/%llu\r\n",
        (unsigned long long)o.off, (unsigned long long)(o.off + o.len - 1),
        (unsigned long long)f->size);
  n += (size_t)snprintf(h + n, HEAD_CAP - n,
                        "Accept-Ranges: bytes\r\nContent-Length: %llu\r\n\r\n",
                        (unsigned long long)o.len);
  o.head_len = n;
  o.file = o.len ? f : NULL;
  if (!o.file) vfs_release(f);
  return send_out(s, status, &o, head_only, o.len);
}

enum http_step http_session_process(struct http_session *s, int64_t now_ms) {
  while (!s->closing && s->len > 0) {
    struct http_request req;
    size_t consumed = 0;
    int rc;
    if (s->inflight >= HTTP_SESSION_INFLIGHT) return HTTP_BUSY;
    rc = http_parse(&s->parser, s->buf, s->len, &req, &consumed);
    if (rc == 0) {
      if (s->len == BUFFER_CAP) /* cannot happen under the limits */
        send_error(s, 431, false, 11, false);
      break;
    }
    if (rc != 200) {
      send_error(s, rc, false, 11, false);
      break;
    }
    if (answer(s, &req) < 0) break;
    memmove(s->buf, s->buf + consumed, s->len - consumed);
    s->len -= consumed;
    s->head_started_ms = s->len ? now_ms : -1;
  }
  if (s->len == 0 || s->closing) {
    drop_buffer(s);
    s->len = 0;
  }
  return s->closing ? HTTP_CLOSE : HTTP_MORE;
}

enum http_step http_session_feed(struct http_session *s, const void *data,
                                 size_t len, int64_t now_ms) {
  if (s->closing) return HTTP_CLOSE;
  if (len > BUFFER_CAP - s->len) len = BUFFER_CAP - s->len;
  if (len == 0) return http_session_process(s, now_ms);
  if (!get_buffer(s)) {
    s->closing = true; /* out of memory: drop the connection */
    return HTTP_CLOSE;
  }
  if (s->len == 0) s->head_started_ms = now_ms;
  memcpy(s->buf + s->len, data, len);
  s->len += len;
  return http_session_process(s, now_ms);
}

int http_session_timeout(struct http_session *s) {
  if (s->closing || s->len == 0) return 1;
  return send_error(s, 408, false, 11, false);
}
