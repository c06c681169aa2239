/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/http_check.c - the parser's invariants on any input (see
 * http_check.h): one trace per way of feeding the bytes, each result
 * checked, and the traces compared.
 */
#include "http_check.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../examples/jaws/http_parse.h"

/* What a feeding produced: every result folded into one hash. */
struct trace {
  uint64_t hash;
  unsigned results;
  int failed;
  char *why;
  size_t why_size;
};

static void fold(struct trace *t, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) t->hash = (t->hash ^ b[i]) * 1099511628211u;
}

static void fail(struct trace *t, const char *fmt, ...) {
  if (t->failed) return;
  t->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->why, t->why_size, fmt, ap);
  va_end(ap);
}

static int known_status(int st) {
  static const int ok[] = {0, 200, 400, 403, 405, 413, 414, 431, 501, 505};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (st == ok[i]) return 1;
  return 0;
}

static void check_path(struct trace *t, const struct http_request *r) {
  const char *p = r->path;
  if (p == NULL || p[0] != '/') return fail(t, "path does not start '/'");
  if (strlen(p) != r->path_len) return fail(t, "path has a NUL");
  /* Every segment but a last empty one is a name: not "", ".", "..". */
  for (size_t i = 0; i < r->path_len;) {
    size_t e = i + 1;
    while (e < r->path_len && p[e] != '/') e++;
    size_t len = e - i - 1;
    const char *s = p + i + 1;
    if (e < r->path_len && len == 0) return fail(t, "empty segment: %s", p);
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
      return fail(t, "dot segment: %s", p);
    if (memchr(s, '\\', len) != NULL) return fail(t, "backslash: %s", p);
    i = e;
  }
}

static void record(struct trace *t, int st, size_t consumed, size_t avail,
                   const struct http_request *r) {
  t->results++;
  if (!known_status(st)) fail(t, "status %d", st);
  if (consumed > avail) fail(t, "consumed %zu > %zu", consumed, avail);
  fold(t, &st, sizeof st);
  fold(t, &consumed, sizeof consumed);
  if (st != 200) return;
  if (consumed == 0) fail(t, "a complete head of 0 bytes");
  check_path(t, r);
  if (r->method == HTTP_OTHER) fail(t, "method other than GET/HEAD");
  if (r->version != 10 && r->version != 11) fail(t, "version %d", r->version);
  if (r->content_length != 0) fail(t, "a body accepted");
  if (r->range.kind == HTTP_RANGE_FROM && r->range.first > r->range.last)
    fail(t, "range first > last");
  fold(t, r->path, r->path_len);
  unsigned char flags[4] = {(unsigned char)r->method, (unsigned char)r->version,
                            r->keep_alive, (unsigned char)r->range.kind};
  fold(t, flags, sizeof flags);
  fold(t, &r->range.first, sizeof r->range.first);
  fold(t, &r->range.last, sizeof r->range.last);
  if (r->has_if_modified_since)
    fold(t, &r->if_modified_since, sizeof r->if_modified_since);
}

static char path_buf[16384];

/* Feeds data with avail growing by `step` from `first` (whole when first
 * is n), parsing every pipelined head. */
static void feed(struct trace *t, const struct http_limits *lim,
                 const unsigned char *data, size_t n, size_t first,
                 size_t step) {
  struct http_parser p;
  struct http_request r;
  http_parser_init(&p, lim, path_buf, lim->request_line + 1);
  const char *d = (const char *)data;
  size_t off = 0, avail = first < n ? first : n;
  for (;;) {
    for (;;) {
      size_t c;
      int st = http_parse(&p, d + off, avail - off, &r, &c);
      if (st == 0) {
        if (c != 0) fail(t, "need more, consumed %zu", c);
        break;
      }
      record(t, st, c, avail - off, &r);
      if (st != 200) return;
      off += c;
    }
    if (avail == n) break;
    avail = n - avail > step ? avail + step : n;
  }
  record(t, 0, 0, n - off, NULL); /* the bytes left over */
}

int http_check_input(const unsigned char *data, size_t n, char *why,
                     size_t why_size) {
  uint64_t h = 14695981039346656037u;
  for (size_t i = 0; i < n; i++) h = (h ^ data[i]) * 1099511628211u;
  /* The defaults, small ones, and ones from the data, so that every bound
   * is met at varying places. */
  const struct http_limits limits[] = {
      HTTP_LIMITS_DEFAULT,
      {40, 96, 3},
      {(size_t)(h >> 8) % 64, (size_t)(h >> 16) % 256, (unsigned)(h >> 24) % 6},
  };
  for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
    struct trace whole = {14695981039346656037u, 0, 0, why, why_size};
    feed(&whole, &limits[l], data, n, n, n);
    size_t k = n > 0 ? (size_t)(h % n) : 0;
    struct trace split = whole, bytes = whole;
    split.hash = bytes.hash = 14695981039346656037u;
    split.results = bytes.results = 0;
    feed(&split, &limits[l], data, n, k, n);
    feed(&bytes, &limits[l], data, n, 0, 1);
    if (whole.failed || split.failed || bytes.failed) return -1;
    if (split.hash != whole.hash || split.results != whole.results) {
      snprintf(why, why_size, "split at %zu differs (limits %zu)", k, l);
      return -1;
    }
    if (bytes.hash != whole.hash || bytes.results != whole.results) {
      snprintf(why, why_size, "byte by byte differs (limits %zu)", l);
      return -1;
    }
  }
  return 0;
}
