/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/stream_common.h - what the strategies over taxi's stream
 * layer (strategy_io.c, strategy_adaptive.c) do alike: their streams'
 * options, the connection limit's refusal, the peer's address for the log,
 * and when a connection reads.
 */
#ifndef JAWS_STREAM_COMMON_H
#define JAWS_STREAM_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <taxi/taxi.h>

#include "http_session.h"
#include "jaws.h"

/* Bytes a stream reads at a time: reading goes on while the session has
 * this much room. */
#define JAWS_READ_BUFFER 8192

/* The options of every connection's stream: the read buffer, a small
 * output buffer (only headers and error pages are copied: bodies go by
 * reference or from the file, at most HTTP_SESSION_INFLIGHT at once, so
 * idle connections stay cheap), TCP_NODELAY, the idle timeout. */
void jaws_stream_options(const struct jaws_server *srv,
                         taxi_stream_options_t *so);

/* The listening address for taxi_listener_create: cfg's host (in
 * brackets when it has a colon) and port, into out[cap]. */
void jaws_stream_address(const struct jaws_config *cfg, unsigned port,
                         char *out, size_t cap);

/* The TLS listener (cfg.tls_port) on io, accepting into on_accept(arg)
 * with options *so and srv->tls, and SIGHUP set to reload its
 * certificate: 0 with srv->tls_listener set, or -1 after a message. */
int jaws_stream_listen_tls(struct jaws_server *srv, taxi_io_t *io,
                           taxi_stream_options_t *so, taxi_accept_fn on_accept,
                           void *arg);

/* Admit an accepted stream under the connection limit (jaws_admit), or
 * answer it 503, end it and count the refusal: false then, and the
 * stream is no longer the caller's. */
bool jaws_stream_admit(struct jaws_server *srv, taxi_stream_t *s);

/* The peer's numeric address without its port into out[cap] ("-" when
 * unknown). */
void jaws_stream_peer(taxi_stream_t *s, char *out, size_t cap);

/* A connection served by a stream, as both strategies keep it: under the
 * connection's own lock. */
struct jaws_stream_conn {
  taxi_stream_t *stream;
  struct http_session *sess;
  bool reading; /* the stream's reading is started (with on_read) */
  bool closed;  /* the stream's close callback has run */
  bool eof;     /* the client ended its side */
  /* A TLS stream whose handshake was not seen complete yet, and when it
   * was accepted: the header timeout covers the handshake too, so that
   * a client that connects and never finishes it is cut as one that
   * never finishes its request head. */
  bool handshaking;
  int64_t accepted_ms;
};

/* Mark a connection just accepted on stream s: handshaking when s is a
 * TLS stream. */
void jaws_stream_accepted(struct jaws_stream_conn *sc, taxi_stream_t *s);

/* The header timeout is due on the connection: its request head has been
 * arriving for too long, or its TLS handshake has.  Under the
 * connection's lock. */
bool jaws_stream_overdue(struct jaws_stream_conn *sc,
                         const struct jaws_server *srv, int64_t now_ms);

/* The header timeout struck (jaws_stream_overdue said so): a handshake
 * not done closes the stream, a request head in part is answered 408 and
 * the connection ended.  Under the connection's lock. */
void jaws_stream_expire(struct jaws_stream_conn *sc,
                        taxi_stream_read_fn on_read);

/* After the session moved (`step`, what http_session_process or _feed
 * said): read while the session has room for a read buffer and is not
 * busy, stop reading when it has not; at the client's end, end the stream
 * once nothing is in flight; on HTTP_CLOSE stop reading (the session
 * closes it).  Under the connection's lock; nothing once closed. */
void jaws_stream_settle(struct jaws_stream_conn *sc,
                        taxi_stream_read_fn on_read, enum http_step step);

/* A read completed on the stream (on_read's arguments): the bytes fed to
 * the session, or at the client's end (or an error) the session's
 * buffered requests processed; then settled as above.  Under the
 * connection's lock; nothing once closed. */
void jaws_stream_read_done(struct jaws_stream_conn *sc,
                           taxi_stream_read_fn on_read, int status,
                           const void *data, size_t len);

#endif /* JAWS_STREAM_COMMON_H */
