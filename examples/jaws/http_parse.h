/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/http_parse.h - the request-head parser of the JAWS-like
 * static-file server: HTTP/1.0 and 1.1, GET and HEAD, no bodies.
 *
 * Incremental and allocation-free.  The caller keeps the bytes received so
 * far in one buffer, starting at the first byte of the request, and calls
 * http_parse() after every read with the whole buffer.  Complete lines are
 * checked once (the parser keeps the offset of the first unchecked line), so
 * garbage is refused as soon as its line ends and a slow client costs O(n)
 * in total; when the empty line arrives the head is parsed once more, as a
 * whole, into a struct http_request.  The result only depends on the bytes,
 * never on how they were split between calls.
 *
 * http_parse() returns
 *   0    need more bytes;
 *   200  a complete head of *consumed bytes: the bytes after it (pipelined
 *        requests) stay in the buffer; drop *consumed bytes and call again;
 *   else the status to answer, after which the connection should be closed:
 *   400  malformed: request line, header line (obs-fold, bare CR or LF,
 *        NUL and other controls, space before the colon, invalid token),
 *        a leading empty line, missing Host in HTTP/1.1, several Host,
 *        invalid or conflicting Content-Length, a bad %-escape, an
 *        encoded '/' (%2f), '\' or control in the path, a fragment;
 *   403  the path goes above the root ("/..", "/a/../..", "/%2e%2e");
 *   405  a method other than GET and HEAD (req->method_name says which,
 *        for the Allow answer);
 *   413  a body: Content-Length > 0 (a GET or HEAD body is refused);
 *   414  the request line is longer than its limit while the method is
 *        fine (so the target is what is long), or the path does not fit
 *        the caller's buffer;
 *   431  the header section is longer than its limit, or too many headers;
 *   501  Transfer-Encoding (no request bodies are read);
 *   505  a well-formed version other than HTTP/1.0 and HTTP/1.1.
 * The parser resets itself after every non-zero result.  On errors found
 * when the head is complete *consumed is its length, otherwise 0.
 *
 * Headers ignored by design: a malformed or multiple If-Modified-Since
 * (absent), a malformed, multi-range or multiple Range, or any Range on
 * HEAD (absent: serve 200, RFC 9110 14.2).  Whether a range is satisfiable
 * is the server's question (it knows the file's size).
 *
 * Pure C11: no OS calls, no allocation, no taxi dependency.
 */
#ifndef JAWS_HTTP_PARSE_H
#define JAWS_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct http_limits {
  size_t request_line;   /* bytes, without its CRLF; default 8 KiB */
  size_t header_section; /* bytes after the request line, through the empty
                            line's CRLF; default 16 KiB */
  unsigned headers;      /* header lines; default 100 */
};

#define HTTP_LIMITS_DEFAULT \
  { 8192, 16384, 100 }

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_OTHER };

enum http_range_kind {
  HTTP_RANGE_NONE,   /* absent or ignored */
  HTTP_RANGE_FROM,   /* bytes=first-last, or bytes=first- (last = UINT64_MAX) */
  HTTP_RANGE_SUFFIX, /* bytes=-suffix: the last `suffix` bytes */
};

struct http_range {
  enum http_range_kind kind;
  uint64_t first, last; /* HTTP_RANGE_FROM, inclusive */
  uint64_t suffix;      /* HTTP_RANGE_SUFFIX; may be 0 (unsatisfiable) */
};

/* Pointers point into the caller's buffer (valid while it is), except
 * `path`, which is the parser's path buffer. */
struct http_request {
  enum http_method method;
  const char *method_name; /* the method token as sent */
  size_t method_len;
  int version;       /* 10 or 11 */
  const char *query; /* raw, after '?'; NULL when the target has no '?' */
  size_t query_len;
  const char *path; /* decoded, normalised, NUL-terminated, starts '/' */
  size_t path_len;
  const char *host; /* NULL when absent (HTTP/1.0 only) */
  size_t host_len;
  bool keep_alive; /* Connection and the version's default */
  bool has_if_modified_since;
  time_t if_modified_since; /* UTC */
  struct http_range range;
  bool has_content_length;
  uint64_t content_length; /* always 0 in a request that is accepted */
  unsigned headers;        /* header lines, known or not */
};

struct http_parser {
  struct http_limits limits;
  char *path;      /* the caller's buffer for the decoded path */
  size_t path_cap; /* request_line + 1 always suffices */
  /* Resume state: lines before line_start are checked. */
  size_t line_start;
  size_t head_start; /* after the request line; 0 while it is incomplete */
  unsigned headers;
};

/* limits may be NULL for the defaults. */
void http_parser_init(struct http_parser *p, const struct http_limits *limits,
                      char *path_buf, size_t path_cap);

void http_parser_reset(struct http_parser *p);

int http_parse(struct http_parser *p, const char *buf, size_t len,
               struct http_request *req, size_t *consumed);

/* An HTTP-date (IMF-fixdate, RFC 850, asctime) to *t; 0 if valid, -1 if
 * not.  Two-digit RFC 850 years 70-99 are 19xx, 00-69 20xx. */
int http_parse_date(const char *s, size_t n, time_t *t);

#endif
