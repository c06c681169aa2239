/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_http_parse.c - the request-head parser of examples/jaws
 * (http_parse.c): valid and pipelined heads, every error status, path
 * normalisation and traversal, each limit at and one past its bound,
 * HTTP-dates, ranges.  Every case is also fed split at every point and byte
 * by byte, and must give the same result.  Last, every file of
 * tests/fuzz/http_corpus/ goes through the fuzzer's invariants.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/jaws/http_parse.h"
#include "fuzz/http_check.h"
#include "runner.h"

#ifndef HTTP_CORPUS_DIR
#define HTTP_CORPUS_DIR "tests/fuzz/http_corpus"
#endif

static const struct http_limits small = {40, 96, 3};
static char path_buf[9000];
static char whole_path[9000];
static struct http_request R;
static size_t used;

/* Parses data[0..n) whole into R (and used); checks that every split in
 * two and byte-by-byte feeding give the same status, length and path. */
static int parse_lim(const char *d, size_t n, const struct http_limits *lim,
                     size_t cap) {
  struct http_parser p;
  http_parser_init(&p, lim, path_buf, cap);
  int st = http_parse(&p, d, n, &R, &used);
  if (st == 200) memcpy(whole_path, R.path, R.path_len + 1);
  for (size_t k = 0; k <= n; k++) {
    struct http_request r;
    size_t c;
    http_parser_init(&p, lim, path_buf, cap);
    int s = http_parse(&p, d, k, &r, &c);
    if (s == 0) s = http_parse(&p, d, n, &r, &c);
    CU_ASSERT_EQUAL(s, st);
    CU_ASSERT_EQUAL(c, used);
    if (s == 200 && st == 200) CU_ASSERT_STRING_EQUAL(r.path, whole_path);
  }
  http_parser_init(&p, lim, path_buf, cap);
  int s = 0;
  size_t c = 0;
  struct http_request r;
  for (size_t k = 1; k <= n && s == 0; k++) s = http_parse(&p, d, k, &r, &c);
  CU_ASSERT_EQUAL(s, st);
  CU_ASSERT_EQUAL(c, used);
  if (st == 200) {
    /* R again from the whole buffer, for the callers' assertions. */
    http_parser_init(&p, lim, path_buf, cap);
    CU_ASSERT_EQUAL(http_parse(&p, d, n, &R, &used), 200);
  }
  return st;
}

static int parse_n(const char *d, size_t n) {
  return parse_lim(d, n, NULL, sizeof path_buf);
}

static int parse(const char *s) { return parse_n(s, strlen(s)); }

#define H11 " HTTP/1.1\r\nHost: h\r\n"

static void test_valid(void) {
  const char *g = "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";
  CU_ASSERT_EQUAL(parse(g), 200);
  CU_ASSERT_EQUAL(used, strlen(g));
  CU_ASSERT_EQUAL(R.method, HTTP_GET);
  CU_ASSERT_EQUAL(R.version, 11);
  CU_ASSERT_STRING_EQUAL(R.path, "/index.html");
  CU_ASSERT_EQUAL(R.path_len, 11);
  CU_ASSERT_EQUAL(R.host_len, 11);
  CU_ASSERT_NSTRING_EQUAL(R.host, "example.com", 11);
  CU_ASSERT_TRUE(R.keep_alive);
  CU_ASSERT_PTR_NULL(R.query);
  CU_ASSERT_FALSE(R.has_if_modified_since);
  CU_ASSERT_EQUAL(R.range.kind, HTTP_RANGE_NONE);
  CU_ASSERT_FALSE(R.has_content_length);
  CU_ASSERT_EQUAL(R.headers, 1);

  CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\n\r\n"), 200);
  CU_ASSERT_EQUAL(R.version, 10);
  CU_ASSERT_FALSE(R.keep_alive);
  CU_ASSERT_PTR_NULL(R.host);
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.0\r\nconnection:Keep-Alive\r\n\r\n"),
                  200);
  CU_ASSERT_TRUE(R.keep_alive);
  CU_ASSERT_EQUAL(parse("GET /" H11 "Connection: foo, Close \r\n\r\n"), 200);
  CU_ASSERT_FALSE(R.keep_alive);
  CU_ASSERT_EQUAL(parse("GET /" H11 "X-Unknown:\r\nA: b\t\r\n\r\n"), 200);
  CU_ASSERT_EQUAL(R.headers, 3);

  CU_ASSERT_EQUAL(parse("HEAD /a/b?x=1&y HTTP/1.1\r\nHOST:\th \r\n\r\n"), 200);
  CU_ASSERT_EQUAL(R.method, HTTP_HEAD);
  CU_ASSERT_STRING_EQUAL(R.path, "/a/b");
  CU_ASSERT_EQUAL(R.query_len, 5);
  CU_ASSERT_NSTRING_EQUAL(R.query, "x=1&y", 5);
  CU_ASSERT_EQUAL(R.host_len, 1);
  CU_ASSERT_EQUAL(parse("GET /?" H11 "\r\n"), 200);
  CU_ASSERT_EQUAL(R.query_len, 0);
  CU_ASSERT_PTR_NOT_NULL(R.query);
  CU_ASSERT_EQUAL(parse("GET http://h/x%41?y" H11 "\r\n"), 200);
  CU_ASSERT_STRING_EQUAL(R.path, "/xA");
  CU_ASSERT_NSTRING_EQUAL(R.query, "y", 1);
  CU_ASSERT_EQUAL(parse("GET HTTP://h" H11 "\r\n"), 200);
  CU_ASSERT_STRING_EQUAL(R.path, "/");
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 200);
  CU_ASSERT_EQUAL(parse("GET /" H11 "Content-Length: 0\r\n\r\n"), 200);
  CU_ASSERT_TRUE(R.has_content_length);
  CU_ASSERT_EQUAL(parse("GET /" H11 "Content-Length: 0 , 0\r\n\r\n"), 200);
  /* Incomplete heads. */
  CU_ASSERT_EQUAL(parse(""), 0);
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: h\r\n"), 0);
  CU_ASSERT_EQUAL(parse("GET / HTTP/1.1\r\nHost: h\r\n\r"), 0);
  CU_ASSERT_EQUAL(used, 0);
}

static void test_pipelined(void) {
  const char *d =
      "GET /a" H11 "\r\nHEAD /b HTTP/1.0\r\n\r\nGET /c" H11 "\r\nGET /d HT";
  size_t n = strlen(d), off = 0;
  const char *paths[] = {"/a", "/b", "/c"};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL_FATAL(parse_n(d + off, n - off), 200);
    CU_ASSERT_STRING_EQUAL(R.path, paths[i]);
    off += used;
  }
  CU_ASSERT_EQUAL(off, n - 9);
  CU_ASSERT_EQUAL(parse_n(d + off, n - off), 0);
  /* The bytes after a head are not looked at, even when they are bad. */
  CU_ASSERT_EQUAL(parse("GET /" H11 "\r\n\1\2\3 junk\r\n\r\n"), 200);
  CU_ASSERT_EQUAL(used, strlen("GET /" H11 "\r\n"));
}

struct error_case {
  const char *text;
  int status;
};

static void test_errors(void) {
  static const struct error_case cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", 400}, /* no Host in 1.1 */
      {"GET  /" H11 "\r\n", 400},
      {"GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
      {" GET /" H11 "\r\n", 400},
      {"GET /\r\n\r\n", 400},
      {"GET / HTTP/1.1\nHost: h\n\n", 400}, /* bare LF */
      {"GET /" H11 "X: y\n\r\n", 400},      /* bare LF in a header */
      {"GET /" H11 "\n", 400},              /* bare LF, empty line */
      {"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400}, /* bare CR */
      {"GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET /" H11 "X: a\r\n b\r\n\r\n", 400}, /* obs-fold */
      {"GET /" H11 "\tX: a\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHo(st: h\r\n\r\n", 400},
      {"GET /" H11 ": v\r\n\r\n", 400},
      {"GET /" H11 "NoColon\r\n\r\n", 400},
      {"GET /" H11 "X: a\x7f\r\n\r\n", 400},
      {"\r\nGET /" H11 "\r\n", 400}, /* a leading empty line */
      {"GET /" H11 "Host: b\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: abc\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: -1\r\n\r\n", 400},
      {"GET /" H11 "Content-Length:\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: 1, 2\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: 0\r\nContent-length: 1\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: 18446744073709551616\r\n\r\n", 400},
      {"GET /" H11 "Content-Length: 5\r\n\r\n", 413},
      {"HEAD /" H11 "Content-Length: 18446744073709551615\r\n\r\n", 413},
      {"GET /" H11 "Transfer-Encoding: chunked\r\n\r\n", 501},
      {"GET /" H11 "Content-Length: 3\r\nTransfer-Encoding: x\r\n\r\n", 501},
      {"POST /" H11 "\r\n", 405},
      {"get /" H11 "\r\n", 405},
      {"OPTIONS *" H11 "\r\n", 405},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/0.9\r\n\r\n", 505},
      {"GET / HTTP/1.10\r\n\r\n", 400},
      {"GET / http/1.1\r\n\r\n", 400},
      {"GET / HTTP/1\r\n\r\n", 400},
      {"GET /a#frag" H11 "\r\n", 400},
      {"GET a" H11 "\r\n", 400},
      {"GET http://h" H11 "\r\n", 200},
      {"GET /%zz" H11 "\r\n", 400},
      {"GET /%4" H11 "\r\n", 400},
      {"GET /a%" H11 "\r\n", 400},
      {"GET /a%00b" H11 "\r\n", 400},
      {"GET /a%0ab" H11 "\r\n", 400},
      {"GET /a%5cb" H11 "\r\n", 400},
      {"GET /a\\b" H11 "\r\n", 400},
      {"GET /a\x80" H11 "\r\n", 400},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int st = parse(cases[i].text);
    CU_ASSERT_EQUAL(st, cases[i].status);
    if (st != cases[i].status)
      printf("\n  case %zu: %d, expected %d\n", i, st, cases[i].status);
  }
  /* 405 names the method; the version is known. */
  CU_ASSERT_EQUAL(parse("DELETE /x HTTP/1.0\r\n\r\n"), 405);
  CU_ASSERT_EQUAL(R.method_len, 6);
  CU_ASSERT_NSTRING_EQUAL(R.method_name, "DELETE", 6);
  CU_ASSERT_EQUAL(R.version, 10);
  CU_ASSERT_EQUAL(used, 22);
  /* NUL anywhere. */
  static const char nul_method[] = "G\0T /" H11 "\r\n";
  static const char nul_header[] = "GET /" H11 "X: a\0b\r\n\r\n";
  static const char nul_target[] = "GET /a\0b" H11 "\r\n";
  CU_ASSERT_EQUAL(parse_n(nul_method, sizeof nul_method - 1), 400);
  CU_ASSERT_EQUAL(parse_n(nul_header, sizeof nul_header - 1), 400);
  CU_ASSERT_EQUAL(parse_n(nul_target, sizeof nul_target - 1), 400);
  /* Garbage is refused when its line ends, not at the limit. */
  CU_ASSERT_EQUAL(parse("\1\2\3\r\n"), 400);
  CU_ASSERT_EQUAL(used, 0);
}

struct path_case {
  const char *target;
  int status;
  const char *path;
};

static void test_paths(void) {
  static const struct path_case cases[] = {
      {"/../etc/passwd", 403, NULL},
      {"/a/../../b", 403, NULL},
      {"/..", 403, NULL},
      {"/%2e%2e/x", 403, NULL},
      {"/a/%2E%2e/%2e%2e/x", 403, NULL},
      {"/%2E%2e%2fx", 400, NULL}, /* an encoded '/' */
      {"/a%2Fb", 400, NULL},
      {"/a/./b/../c", 200, "/a/c"},
      {"//double//slash", 200, "/double/slash"},
      {"/a/%2e%2e/b", 200, "/b"},
      {"/a/%2e/b", 200, "/a/b"},
      {"/a/b/..", 200, "/a/"},
      {"/a/b/.", 200, "/a/b/"},
      {"/a/..", 200, "/"},
      {"/.", 200, "/"},
      {"/", 200, "/"},
      {"/dir/", 200, "/dir/"},
      {"/...", 200, "/..."},
      {"/..a/.b", 200, "/..a/.b"},
      {"/a%20b%7E", 200, "/a b~"},
      {"/%c3%a9", 200, "/\xc3\xa9"},
  };
  char req[200];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(req, sizeof req, "GET %s" H11 "\r\n", cases[i].target);
    int st = parse(req);
    CU_ASSERT_EQUAL(st, cases[i].status);
    if (st != cases[i].status)
      printf("\n  %s: %d, expected %d\n", cases[i].target, st, cases[i].status);
    if (st == 200 && cases[i].path != NULL)
      CU_ASSERT_STRING_EQUAL(R.path, cases[i].path);
  }
  /* The path buffer: "/abc" needs 5 bytes. */
  const char *r = "GET /abc" H11 "\r\n";
  CU_ASSERT_EQUAL(parse_lim(r, strlen(r), NULL, 5), 200);
  CU_ASSERT_EQUAL(parse_lim(r, strlen(r), NULL, 4), 414);
  CU_ASSERT_EQUAL(parse_lim(r, strlen(r), NULL, 1), 414);
}

/* "GET /aaa HTTP/1.0" with a request line of `len` bytes. */
static size_t request_line(char *buf, size_t len) {
  memcpy(buf, "GET /", 5);
  memset(buf + 5, 'a', len - 14);
  memcpy(buf + len - 9, " HTTP/1.0\r\n", 11);
  return len + 2;
}

/* A request line then `count` headers "X: v" then one of `last` value
 * bytes (none when last is 0), then the empty line. */
static size_t with_headers(char *buf, unsigned count, size_t last) {
  size_t n = request_line(buf, 16);
  for (unsigned i = 0; i < count; i++)
    n += (size_t)sprintf(buf + n, "X: v\r\n");
  if (last > 0) {
    memcpy(buf + n, "Y: ", 3);
    memset(buf + n + 3, 'b', last);
    memcpy(buf + n + 3 + last, "\r\n", 2);
    n += last + 5;
  }
  memcpy(buf + n, "\r\n", 2);
  return n + 2;
}

static char big[20000];

static void test_limits(void) {
  /* Request line: 40 bytes pass, 41 are too long (414: the target). */
  size_t n = request_line(big, 40);
  memcpy(big + n, "\r\n", 2);
  CU_ASSERT_EQUAL(parse_lim(big, n + 2, &small, 41), 200);
  n = request_line(big, 41);
  memcpy(big + n, "\r\n", 2);
  CU_ASSERT_EQUAL(parse_lim(big, n + 2, &small, 42), 414);
  CU_ASSERT_EQUAL(parse_lim(big, 40, &small, 42), 0);
  CU_ASSERT_EQUAL(parse_lim(big, 41, &small, 42), 414);
  CU_ASSERT_EQUAL(parse_lim(big, 42, &small, 42), 414);
  /* Long, but not because of the target: 400. */
  const char *v = "GET / HTTP/1.0xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n\r\n";
  CU_ASSERT_EQUAL(parse_lim(v, strlen(v), &small, 41), 400);
  v = "GET /aaaaaaaaaaaaaaaaaaaaaa HTTP/1.0xxxxxxxxxx\r\n\r\n";
  CU_ASSERT_EQUAL(parse_lim(v, strlen(v), &small, 41), 400);
  v = "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.";
  CU_ASSERT_EQUAL(parse_lim(v, strlen(v), &small, 41), 414);
  memset(big, 'A', 60);
  CU_ASSERT_EQUAL(parse_lim(big, 60, &small, 41), 400);
  /* Header section: 16 + 3 + 89 + 2 + 2 - 16 = 96 bytes pass. */
  n = with_headers(big, 0, 89);
  CU_ASSERT_EQUAL(parse_lim(big, n, &small, 41), 200);
  n = with_headers(big, 0, 90);
  CU_ASSERT_EQUAL(parse_lim(big, n, &small, 41), 431);
  /* Header count: 3 pass, 4 do not. */
  n = with_headers(big, 3, 0);
  CU_ASSERT_EQUAL(parse_lim(big, n, &small, 41), 200);
  CU_ASSERT_EQUAL(R.headers, 3);
  n = with_headers(big, 4, 0);
  CU_ASSERT_EQUAL(parse_lim(big, n, &small, 41), 431);

  /* The defaults: 8192, 16384, 100. */
  struct http_parser p;
  http_parser_init(&p, NULL, path_buf, sizeof path_buf);
  CU_ASSERT_EQUAL(p.limits.request_line, 8192);
  CU_ASSERT_EQUAL(p.limits.header_section, 16384);
  CU_ASSERT_EQUAL(p.limits.headers, 100);
  n = request_line(big, 8192);
  memcpy(big + n, "\r\n", 2);
  CU_ASSERT_EQUAL(parse_lim(big, n + 2, NULL, 8193), 200);
  CU_ASSERT_EQUAL(R.path_len, 8192 - 13);
  n = request_line(big, 8193);
  memcpy(big + n, "\r\n", 2);
  CU_ASSERT_EQUAL(parse_lim(big, n + 2, NULL, 8194), 414);
  n = with_headers(big, 100, 0);
  CU_ASSERT_EQUAL(parse_n(big, n), 200);
  n = with_headers(big, 101, 0);
  CU_ASSERT_EQUAL(parse_n(big, n), 431);
  n = with_headers(big, 0, 16384 - 7);
  CU_ASSERT_EQUAL(parse_n(big, n), 200);
  n = with_headers(big, 0, 16384 - 6);
  CU_ASSERT_EQUAL(parse_n(big, n), 431);
}

static void test_dates(void) {
  time_t t = 1;
  CU_ASSERT_EQUAL(http_parse_date("Sun, 06 Nov 1994 08:49:37 GMT", 29, &t), 0);
  CU_ASSERT_EQUAL(t, 784111777);
  t = 1;
  CU_ASSERT_EQUAL(http_parse_date("Sunday, 06-Nov-94 08:49:37 GMT", 30, &t), 0);
  CU_ASSERT_EQUAL(t, 784111777);
  t = 1;
  CU_ASSERT_EQUAL(http_parse_date("Sun Nov  6 08:49:37 1994", 24, &t), 0);
  CU_ASSERT_EQUAL(t, 784111777);
  CU_ASSERT_EQUAL(http_parse_date("Thursday, 01-Jan-70 00:00:00 GMT", 32, &t),
                  0);
  CU_ASSERT_EQUAL(t, 0);
  CU_ASSERT_EQUAL(http_parse_date("Tue, 29 Feb 2000 23:59:60 GMT", 29, &t), 0);
  CU_ASSERT_EQUAL(t, 951868800);
  CU_ASSERT_EQUAL(http_parse_date("Mon, 01 Jan 1900 00:00:00 GMT", 29, &t),
                  sizeof(time_t) >= 8 ? 0 : -1);
  static const char *const bad[] = {
      "",
      "Sun, 06 Nov 1994 08:49:37 UTC",
      "Sun, 06 Nov 1994 08:49:37 GMT ",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 31 Feb 1994 08:49:37 GMT",
      "Sun, 29 Feb 1900 08:49:37 GMT",
      "Sun, 00 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT",
      "Sun, 06 Nov 1994 08:49:61 GMT",
      "Sun, 06 Nov 1994 08-49-37 GMT",
      "Sun, 06 Xyz 1994 08:49:37 GMT",
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Fun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 0994 08:49:37 GMT",
      "Sunday, 06-Nov-1994 08:49:37 GMT",
      "Sonday, 06-Nov-94 08:49:37 GMT",
      "Sunday, 06 Nov 94 08:49:37 GMT",
      "Sun Nov 6 08:49:37 1994",
      "Sun Nov  6 08:49:37 94",
      "Sun Nov  x 08:49:37 1994",
      "1994-11-06T08:49:37Z",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(http_parse_date(bad[i], strlen(bad[i]), &t), -1);
  }
  /* In a request: valid, invalid (ignored), twice (ignored). */
  CU_ASSERT_EQUAL(
      parse("GET /" H11
            "If-Modified-Since:  Sun Nov  6 08:49:37 1994 \r\n\r\n"),
      200);
  CU_ASSERT_TRUE(R.has_if_modified_since);
  CU_ASSERT_EQUAL(R.if_modified_since, 784111777);
  CU_ASSERT_EQUAL(parse("GET /" H11 "If-Modified-Since: yesterday\r\n\r\n"),
                  200);
  CU_ASSERT_FALSE(R.has_if_modified_since);
  CU_ASSERT_EQUAL(
      parse("GET /" H11 "If-Modified-Since: Sun Nov  6 08:49:37 1994\r\n"
            "If-Modified-Since: Sun Nov  6 08:49:37 1994\r\n\r\n"),
      200);
  CU_ASSERT_FALSE(R.has_if_modified_since);
}

struct range_case {
  const char *header;
  enum http_range_kind kind;
  uint64_t a, b;
};

static void test_ranges(void) {
  static const struct range_case cases[] = {
      {"Range: bytes=0-99\r\n", HTTP_RANGE_FROM, 0, 99},
      {"Range: bytes=5-5\r\n", HTTP_RANGE_FROM, 5, 5},
      {"range: BYTES=7-\r\n", HTTP_RANGE_FROM, 7, UINT64_MAX},
      {"Range: bytes=-5\r\n", HTTP_RANGE_SUFFIX, 5, 0},
      {"Range: bytes=-0\r\n", HTTP_RANGE_SUFFIX, 0, 0},
      {"Range: bytes=0-1,3-4\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes=5-2\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: items=0-1\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes=a-b\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes=-\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes=1\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes = 1-2\r\n", HTTP_RANGE_NONE, 0, 0},
      {"Range: bytes=1-2\r\nRange: bytes=1-2\r\n", HTTP_RANGE_NONE, 0, 0},
  };
  char req[200];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(req, sizeof req, "GET /f" H11 "%s\r\n", cases[i].header);
    CU_ASSERT_EQUAL_FATAL(parse(req), 200);
    CU_ASSERT_EQUAL(R.range.kind, cases[i].kind);
    if (cases[i].kind == HTTP_RANGE_FROM) {
      CU_ASSERT_EQUAL(R.range.first, cases[i].a);
      CU_ASSERT_EQUAL(R.range.last, cases[i].b);
    } else if (cases[i].kind == HTTP_RANGE_SUFFIX) {
      CU_ASSERT_EQUAL(R.range.suffix, cases[i].a);
    }
  }
  /* Range is for GET only. */
  CU_ASSERT_EQUAL(parse("HEAD /f" H11 "Range: bytes=0-1\r\n\r\n"), 200);
  CU_ASSERT_EQUAL(R.range.kind, HTTP_RANGE_NONE);
}

/* Every corpus file (the fuzzer's seeds and its findings) passes the
 * fuzzer's invariants. */
static void test_corpus(void) {
  const char *dir = getenv("HTTP_CORPUS_DIR");
  if (dir == NULL) dir = HTTP_CORPUS_DIR;
  DIR *d = opendir(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  static unsigned char data[65536];
  char name[4096], why[256];
  unsigned files = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(name, sizeof name, "%s/%s", dir, e->d_name);
    FILE *f = fopen(name, "rb");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f == NULL) continue;
    size_t n = fread(data, 1, sizeof data, f);
    fclose(f);
    int rc = http_check_input(data, n, why, sizeof why);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0) printf("\n  %s: %s\n", name, why);
    files++;
  }
  closedir(d);
  CU_ASSERT(files >= 12);
}

static CU_TestInfo http_tests[] = {
    {"valid heads", test_valid},
    {"pipelined heads", test_pipelined},
    {"every error status", test_errors},
    {"paths: decoding, dot segments, traversal", test_paths},
    {"limits at and past their bounds", test_limits},
    {"dates: three formats, invalid ones", test_dates},
    {"ranges", test_ranges},
    {"fuzz corpus through the invariants", test_corpus},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t http_suite = {"jaws: HTTP request parser",
                                             http_tests, 120, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&http_suite};
  return taxi_test_run("jaws HTTP parser", suites, 1, argc, argv);
}
