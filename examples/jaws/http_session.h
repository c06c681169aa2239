/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/http_session.h - the HTTP side of one connection, written
 * once for every strategy: it is fed the bytes that arrive, parses each
 * request head (http_parse.h), looks the file up in the cache (vfs.h) and
 * hands each response to its sink as a header plus an optional body (a
 * range of a cached file: memory or an open handle).  How the bytes move
 * (a taxi stream, a blocking socket) is the sink's business only.
 *
 * Flow control: at most HTTP_SESSION_INFLIGHT responses are queued at the
 * sink at once; further pipelined requests wait in the session's buffer
 * until http_session_sent() reports one done, and the strategy stops
 * reading while http_session_room() is less than it reads at a time.
 *
 * Threads: a session is used by one thread at a time (its connection's
 * callbacks, serialised by the strategy).
 */
#ifndef JAWS_HTTP_SESSION_H
#define JAWS_HTTP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jaws.h"
#include "vfs.h"

#define HTTP_SESSION_INFLIGHT 4

/* One response.  head is valid during the call only (copy it). */
struct http_out {
  const char *head;
  size_t head_len;
  struct vfs_file *file; /* the body's file (its reference passes to the
                            sink), or NULL */
  uint64_t off, len;     /* the body's range of file */
  bool close;            /* end the connection once this is sent */
};

struct http_sink_ops {
  /* Queue (or send) a response.  Returns 1: sent already; 0: queued, and
   * the sink will call http_session_sent() once it is; -1: the connection
   * is broken.  The file's reference is the sink's in every case. */
  int (*respond)(void *sink, const struct http_out *out);
};

enum http_step {
  HTTP_MORE,  /* wants more bytes */
  HTTP_BUSY,  /* has requests waiting for responses to drain */
  HTTP_CLOSE, /* a final response is queued (or the connection broke):
                 read no more */
};

struct http_session;

struct http_session *http_session_new(struct jaws_server *srv,
                                      const struct http_sink_ops *ops,
                                      void *sink, const char *peer);
void http_session_free(struct http_session *s);

/* Room for bytes in the session's buffer. */
size_t http_session_room(const struct http_session *s);

/* Append len <= room bytes, then answer what can be answered. */
enum http_step http_session_feed(struct http_session *s, const void *data,
                                 size_t len, int64_t now_ms);

/* Answer buffered requests (after http_session_sent made room). */
enum http_step http_session_process(struct http_session *s, int64_t now_ms);

/* A queued response is sent (or failed). */
void http_session_sent(struct http_session *s);

/* Responses queued and not yet sent. */
unsigned http_session_inflight(const struct http_session *s);

/* The head of a request has been arriving for longer than the header
 * timeout. */
bool http_session_expired(const struct http_session *s, int64_t now_ms);

/* Part of a request is buffered. */
bool http_session_partial(const struct http_session *s);

/* The header timeout struck: answer 408 when part of a request arrived.
 * Returns the sink's result, or 1 when nothing needed saying. */
int http_session_timeout(struct http_session *s);

#endif /* JAWS_HTTP_SESSION_H */
