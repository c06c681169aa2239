/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/http_parse.c - the HTTP request-head parser (see
 * http_parse.h): a line pass as bytes arrive (syntax, limits), then one
 * pass over the complete head (request line, path, the headers the server
 * needs).
 */
#include "http_parse.h"

#include <string.h>

static const struct http_limits default_limits = HTTP_LIMITS_DEFAULT;

void http_parser_init(struct http_parser *p, const struct http_limits *limits,
                      char *path_buf, size_t path_cap) {
  p->limits = limits != NULL ? *limits : default_limits;
  p->path = path_buf;
  p->path_cap = path_cap;
  http_parser_reset(p);
}

void http_parser_reset(struct http_parser *p) {
  p->line_start = 0;
  p->head_start = 0;
  p->headers = 0;
}

/* tchar of RFC 9110 5.6.2 */
static bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
      (c >= 'A' && c <= 'Z'))
    return true;
  return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value's byte: VCHAR, obs-text, SP, HTAB. */
static bool is_vbyte(unsigned char c) {
  return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static bool ieq(const char *a, size_t n, const char *lit) {
  size_t m = strlen(lit);
  if (n != m) return false;
  for (size_t i = 0; i < n; i++)
    if (lower(a[i]) != lit[i]) return false;
  return true;
}

/* The method token's length when the line starts with a token and a SP,
 * else 0. */
static size_t method_end(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && is_tchar((unsigned char)s[i])) i++;
  return i > 0 && i < n && s[i] == ' ' ? i : 0;
}

/* Could s[0..n) begin a version "HTTP/d.d"? */
static bool version_prefix(const char *s, size_t n) {
  static const char pattern[] = "HTTP/9.9";
  if (n > 8) return false;
  for (size_t i = 0; i < n; i++) {
    if (pattern[i] == '9' ? s[i] < '0' || s[i] > '9' : s[i] != pattern[i])
      return false;
  }
  return true;
}

/* A request line that is too long: 414 when the method and its SP are fine
 * and what follows the target, if anything within the limit, can still be
 * a version (the target is what is long), 400 otherwise.  Only the first
 * limit + 1 bytes are looked at, so every split of the input decides
 * alike. */
static int too_long_line(const char *s, size_t limit) {
  size_t m = method_end(s, limit + 1);
  if (m == 0) return 400;
  const char *sp = memchr(s + m + 1, ' ', limit - m);
  if (sp == NULL) return 414;
  size_t v = (size_t)(sp + 1 - s);
  return version_prefix(sp + 1, limit + 1 - v) ? 414 : 400;
}

static bool is_version(const char *s, size_t n) {
  return n == 8 && memcmp(s, "HTTP/", 5) == 0 && s[5] >= '0' && s[5] <= '9' &&
         s[6] == '.' && s[7] >= '0' && s[7] <= '9';
}

/* The request line (without CRLF): method SP target SP version.  The
 * target's bytes are visible ASCII; '#' is refused. */
static int check_request_line(const char *s, size_t n) {
  size_t m = method_end(s, n);
  if (m == 0) return 400;
  size_t t = m + 1, e = t;
  while (e < n && s[e] != ' ') {
    unsigned char c = (unsigned char)s[e];
    if (c <= 0x20 || c >= 0x7f || c == '#') return 400;
    e++;
  }
  if (e == t || e == n) return 400;
  return is_version(s + e + 1, n - e - 1) ? 0 : 400;
}

/* A header line (without CRLF): token ':' OWS value OWS. */
static int check_header_line(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && is_tchar((unsigned char)s[i])) i++;
  if (i == 0 || i == n || s[i] != ':') return 400; /* obs-fold starts SP */
  for (i++; i < n; i++)
    if (!is_vbyte((unsigned char)s[i])) return 400;
  return 0;
}

/* The line pass: checks every complete line from p->line_start on.
 * Returns 0 with *end = the head's length when the empty line is found,
 * 0 with *end = 0 when more is needed, or an error status. */
static int scan_lines(struct http_parser *p, const char *buf, size_t len,
                      size_t *end) {
  const struct http_limits *lim = &p->limits;
  *end = 0;
  for (;;) {
    size_t s = p->line_start;
    const char *lf = memchr(buf + s, '\n', len - s);
    bool request_line = p->head_start == 0;
    if (lf == NULL) {
      /* An incomplete line: only the limits can be judged. */
      size_t k = len - s;
      if (request_line) {
        if (k > lim->request_line + 1 ||
            (k == lim->request_line + 1 && buf[len - 1] != '\r'))
          return too_long_line(buf, lim->request_line);
      } else if (len - p->head_start > lim->header_section) {
        return 431;
      }
      return 0;
    }
    size_t e = (size_t)(lf - buf); /* the LF */
    size_t n = e - s;              /* the line with its CR, if any */
    bool cr = n > 0 && buf[e - 1] == '\r';
    size_t content = cr ? n - 1 : n;
    if (request_line) {
      if (content > lim->request_line)
        return too_long_line(buf, lim->request_line);
      if (!cr || memchr(buf, '\r', content) != NULL) return 400;
      int st = check_request_line(buf, content);
      if (st != 0) return st;
      p->head_start = e + 1;
    } else {
      if (e + 1 - p->head_start > lim->header_section) return 431;
      if (content == 0 && cr) {
        *end = e + 1;
        return 0;
      }
      if (++p->headers > lim->headers) return 431;
      if (!cr || content == 0) return 400; /* bare LF */
      int st = check_header_line(buf + s, content);
      if (st != 0) return st;
    }
    p->line_start = e + 1;
  }
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes s[0..n) (starting '/') into out, removing empty and dot segments
 * (RFC 3986 5.2.4, on decoded segments, so "%2e%2e" is ".."); 0, or the
 * status to answer. */
static int normalise_path(const char *s, size_t n, char *out, size_t cap,
                          size_t *out_len) {
  if (cap < 2) return 414;
  size_t o = 0;
  out[o++] = '/';
  size_t i = 1;
  while (i <= n) {
    /* One segment: decode it after the current '/'. */
    size_t seg = o;
    while (i < n && s[i] != '/') {
      unsigned char c = (unsigned char)s[i];
      if (c == '%') {
        int h = i + 2 < n ? hex(s[i + 1]) : -1;
        int l = h >= 0 ? hex(s[i + 2]) : -1;
        if (l < 0) return 400;
        c = (unsigned char)(h * 16 + l);
        i += 3;
      } else {
        i++;
      }
      if (c == '/' || c == '\\' || c < 0x20 || c == 0x7f) return 400;
      if (o + 1 >= cap) return 414;
      out[o++] = (char)c;
    }
    bool last = i >= n;
    size_t len = o - seg;
    if (len == 1 && out[seg] == '.') {
      o = seg; /* "." */
    } else if (len == 2 && out[seg] == '.' && out[seg + 1] == '.') {
      if (seg == 1) return 403; /* above the root */
      o = seg - 1;              /* back over this '/' and the segment */
      while (out[o - 1] != '/') o--;
    } else if (len > 0 && !last) {
      if (o + 1 >= cap) return 414;
      out[o++] = '/';
    }
    /* An empty segment ("//") adds nothing. */
    i++;
  }
  out[o] = '\0';
  *out_len = o;
  return 0;
}

/* The target: origin-form, or absolute-form "http://authority/path". */
static int parse_target(struct http_parser *p, const char *t, size_t n,
                        struct http_request *req) {
  if (n >= 7 && ieq(t, 7, "http://")) {
    size_t i = 7;
    while (i < n && t[i] != '/' && t[i] != '?') i++;
    t += i;
    n -= i;
    if (n == 0 || t[0] == '?') {
      /* An empty path is "/". */
      const char *q = n > 0 ? t + 1 : NULL;
      req->query = q;
      req->query_len = q != NULL ? n - 1 : 0;
      if (p->path_cap < 2) return 414;
      p->path[0] = '/';
      p->path[1] = '\0';
      req->path = p->path;
      req->path_len = 1;
      return 0;
    }
  }
  if (n == 0 || t[0] != '/') return 400;
  const char *q = memchr(t, '?', n);
  size_t plen = q != NULL ? (size_t)(q - t) : n;
  if (q != NULL) {
    req->query = q + 1;
    req->query_len = n - plen - 1;
  }
  int st = normalise_path(t, plen, p->path, p->path_cap, &req->path_len);
  req->path = p->path;
  return st;
}

/* Does the comma-separated list v contain the token tok? */
static bool list_has(const char *v, size_t n, const char *tok) {
  size_t i = 0;
  while (i < n) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t b = i;
    while (i < n && v[i] != ',') i++;
    size_t e = i;
    while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e > b && ieq(v + b, e - b, tok)) return true;
  }
  return false;
}

/* A decimal number without sign; -1 if not one or over UINT64_MAX. */
static int parse_u64(const char *s, size_t n, uint64_t *v) {
  if (n == 0) return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return -1;
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

/* Content-Length: 1*DIGIT, or a list of equal ones (RFC 9112 6.3). */
static int content_length(const char *v, size_t n, struct http_request *req) {
  size_t i = 0;
  do {
    while (i < n && (v[i] == ' ' || v[i] == '\t')) i++;
    size_t b = i;
    while (i < n && v[i] != ',') i++;
    size_t e = i;
    while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    uint64_t x;
    if (parse_u64(v + b, e - b, &x) != 0) return 400;
    if (req->has_content_length && x != req->content_length) return 400;
    req->has_content_length = true;
    req->content_length = x;
  } while (i++ < n);
  return 0;
}

/* Range: one "bytes=" range, else none. */
static void parse_range(const char *v, size_t n, struct http_range *r) {
  r->kind = HTTP_RANGE_NONE;
  if (n < 6 || !ieq(v, 5, "bytes") || v[5] != '=') return;
  v += 6;
  n -= 6;
  const char *dash = memchr(v, '-', n);
  if (dash == NULL || memchr(v, ',', n) != NULL) return;
  size_t a = (size_t)(dash - v), b = n - a - 1;
  uint64_t x, y;
  if (a == 0) {
    if (parse_u64(dash + 1, b, &y) != 0) return;
    r->kind = HTTP_RANGE_SUFFIX;
    r->suffix = y;
    return;
  }
  if (parse_u64(v, a, &x) != 0) return;
  if (b == 0) {
    y = UINT64_MAX;
  } else if (parse_u64(dash + 1, b, &y) != 0 || y < x) {
    return;
  }
  r->kind = HTTP_RANGE_FROM;
  r->first = x;
  r->last = y;
}

/* The pass over a complete head of `len` bytes (its line syntax checked). */
static int parse_head(struct http_parser *p, const char *buf, size_t len,
                      struct http_request *req) {
  memset(req, 0, sizeof *req);
  const char *line_end = memchr(buf, '\r', len);
  size_t n = (size_t)(line_end - buf);
  size_t m = method_end(buf, n);
  const char *target = buf + m + 1;
  const char *sp = memchr(target, ' ', n - m - 1);
  const char *ver = sp + 1;
  req->method_name = buf;
  req->method_len = m;
  req->method = m == 3 && memcmp(buf, "GET", 3) == 0    ? HTTP_GET
                : m == 4 && memcmp(buf, "HEAD", 4) == 0 ? HTTP_HEAD
                                                        : HTTP_OTHER;
  if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1')) return 505;
  req->version = ver[7] == '0' ? 10 : 11;
  if (req->method == HTTP_OTHER) return 405;
  int st = parse_target(p, target, (size_t)(sp - target), req);
  if (st != 0) return st;

  bool close = false, keep = false, te = false;
  unsigned hosts = 0, dates = 0, ranges = 0;
  size_t s = p->head_start;
  while (s + 2 < len) {
    const char *cr = memchr(buf + s, '\r', len - s);
    const char *name = buf + s;
    const char *colon = memchr(name, ':', (size_t)(cr - name));
    size_t nlen = (size_t)(colon - name);
    const char *v = colon + 1;
    const char *ve = cr;
    while (v < ve && (*v == ' ' || *v == '\t')) v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    size_t vn = (size_t)(ve - v);
    req->headers++;
    if (ieq(name, nlen, "host")) {
      hosts++;
      req->host = v;
      req->host_len = vn;
    } else if (ieq(name, nlen, "connection")) {
      close = close || list_has(v, vn, "close");
      keep = keep || list_has(v, vn, "keep-alive");
    } else if (ieq(name, nlen, "content-length")) {
      if (content_length(v, vn, req) != 0) return 400;
    } else if (ieq(name, nlen, "transfer-encoding")) {
      te = true;
    } else if (ieq(name, nlen, "if-modified-since")) {
      dates++;
      req->has_if_modified_since =
          http_parse_date(v, vn, &req->if_modified_since) == 0;
    } else if (ieq(name, nlen, "range")) {
      ranges++;
      parse_range(v, vn, &req->range);
    }
    s = (size_t)(cr - buf) + 2;
  }
  if (hosts > 1 || (hosts == 0 && req->version == 11)) return 400;
  if (te) return 501;
  if (req->content_length > 0) return 413;
  if (dates > 1) req->has_if_modified_since = false;
  if (ranges > 1 || req->method == HTTP_HEAD) req->range.kind = HTTP_RANGE_NONE;
  req->keep_alive = !close && (req->version == 11 || keep);
  return 0;
}

int http_parse(struct http_parser *p, const char *buf, size_t len,
               struct http_request *req, size_t *consumed) {
  size_t end;
  *consumed = 0;
  if (len == 0) return 0;
  int st = scan_lines(p, buf, len, &end);
  if (st == 0 && end == 0) return 0;
  if (st == 0) {
    *consumed = end;
    st = parse_head(p, buf, end, req);
    if (st == 0) st = 200;
  }
  http_parser_reset(p);
  return st;
}

/* ---- dates (RFC 9110 5.6.7) ---------------------------------------- */

static const char *const wdays[] = {"Sun", "Mon", "Tue", "Wed",
                                    "Thu", "Fri", "Sat"};
static const char *const long_wdays[] = {"Sunday",    "Monday",   "Tuesday",
                                         "Wednesday", "Thursday", "Friday",
                                         "Saturday"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Index of s[0..n) in names (exact case), or -1. */
static int lookup(const char *s, size_t n, const char *const *names,
                  int count) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0) return i;
  return -1;
}

/* n digits at s (a leading space allowed when sp), or -1. */
static int digits(const char *s, size_t n, bool sp) {
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (sp && i == 0 && s[i] == ' ') continue;
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian, m 1-12). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* "HH:MM:SS" */
static int hms(const char *s, int *h, int *mi, int *sec) {
  if (s[2] != ':' || s[5] != ':') return -1;
  *h = digits(s, 2, false);
  *mi = digits(s + 3, 2, false);
  *sec = digits(s + 6, 2, false);
  return *h < 0 || *mi < 0 || *sec < 0 ? -1 : 0;
}

static int to_time(int y, int mon, int d, int h, int mi, int sec, time_t *t) {
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1900 || mon < 0 || d < 1 || d > mdays[mon] || h > 23 || mi > 59 ||
      sec > 60)
    return -1;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mon == 1 && d == 29 && !leap) return -1;
  int64_t v = days_from_civil(y, mon + 1, d) * 86400 + h * 3600 + mi * 60 + sec;
  time_t r = (time_t)v;
  if ((int64_t)r != v) return -1; /* a 32-bit time_t */
  *t = r;
  return 0;
}

int http_parse_date(const char *s, size_t n, time_t *t) {
  int y, mon, d, h, mi, sec;
  const char *tm; /* "HH:MM:SS" */
  const char *c = memchr(s, ',', n < 10 ? n : 10);
  if (c != NULL && c - s == 3) {
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (n != 29 || lookup(s, 3, wdays, 7) < 0 || s[4] != ' ' || s[7] != ' ' ||
        s[11] != ' ' || s[16] != ' ' || memcmp(s + 25, " GMT", 4) != 0)
      return -1;
    d = digits(s + 5, 2, false);
    mon = lookup(s + 8, 3, months, 12);
    y = digits(s + 12, 4, false);
    tm = s + 17;
  } else if (c != NULL) {
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    size_t w = (size_t)(c - s);
    if (lookup(s, w, long_wdays, 7) < 0 || n != w + 24 || s[w + 1] != ' ' ||
        s[w + 4] != '-' || s[w + 8] != '-' || s[w + 11] != ' ' ||
        memcmp(s + w + 20, " GMT", 4) != 0)
      return -1;
    s += w + 2;
    d = digits(s, 2, false);
    mon = lookup(s + 3, 3, months, 12);
    y = digits(s + 7, 2, false);
    if (y >= 0) y += y < 70 ? 2000 : 1900;
    tm = s + 10;
  } else {
    /* asctime: "Sun Nov  6 08:49:37 1994" */
    if (n != 24 || lookup(s, 3, wdays, 7) < 0 || s[3] != ' ' || s[7] != ' ' ||
        s[10] != ' ' || s[19] != ' ')
      return -1;
    mon = lookup(s + 4, 3, months, 12);
    d = digits(s + 8, 2, true);
    y = digits(s + 20, 4, false);
    tm = s + 11;
  }
  if (d < 0 || y < 0 || hms(tm, &h, &mi, &sec) != 0) return -1;
  return to_time(y, mon, d, h, mi, sec, t);
}
