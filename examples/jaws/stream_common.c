/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/stream_common.c - see stream_common.h.
 */
#include "stream_common.h"

#include "jaws_os.h"
#include "jaws_tls.h"

#include <signal.h>

#include <stdio.h>
#include <string.h>

void jaws_stream_options(const struct jaws_server *srv,
                         taxi_stream_options_t *so) {
  taxi_stream_options_init(so);
  so->read_buffer = JAWS_READ_BUFFER;
  so->high_watermark = 8192;
  so->low_watermark = 2048;
  so->flags = TAXI_STREAM_NODELAY;
  so->idle_timeout = (taxi_time_t)srv->cfg.idle_timeout_ms * TAXI_NSEC_PER_MSEC;
}

void jaws_stream_address(const struct jaws_config *cfg, unsigned port,
                         char *out, size_t cap) {
  snprintf(out, cap, strchr(cfg->host, ':') ? "[%s]:%u" : "%s:%u", cfg->host,
           port);
}

int jaws_stream_listen_tls(struct jaws_server *srv, taxi_io_t *io,
                           taxi_stream_options_t *so, taxi_accept_fn on_accept,
                           void *arg) {
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  char address[300];
  int rc;
  so->tls = srv->tls;
  lo.stream = so;
  jaws_stream_address(&srv->cfg,
                      srv->cfg.tls_only ? srv->cfg.port : srv->cfg.tls_port,
                      address, sizeof address);
  if ((rc = taxi_listener_create(&srv->tls_listener, io, address, &lo,
                                 on_accept, arg)) < 0) {
    fprintf(stderr, "jaws: cannot listen for TLS on %s: %s\n", address,
            taxi_strerror(rc));
    srv->tls_listener = NULL;
    return -1;
  }
#ifdef SIGHUP
  if ((rc = taxi_io_on_signal(io, SIGHUP, jaws_tls_on_reload, srv)) < 0)
    fprintf(stderr, "jaws: no TLS reload on SIGHUP: %s\n", taxi_strerror(rc));
#endif
  return 0;
}

bool jaws_stream_admit(struct jaws_server *srv, taxi_stream_t *s) {
  if (jaws_admit(srv)) return true;
  atomic_fetch_add(&srv->refused, 1);
  if (taxi_stream_write(s, jaws_busy_response, strlen(jaws_busy_response), NULL,
                        NULL) < 0 ||
      taxi_stream_end(s) < 0)
    taxi_stream_close(s);
  return false;
}

void jaws_stream_peer(taxi_stream_t *s, char *out, size_t cap) {
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  snprintf(out, cap, "-");
  if (taxi_stream_peer(s, &a) != 0 ||
      taxi_addr_format(&a, text, sizeof text) < 0)
    return;
  char *colon = strrchr(text, ':');
  if (colon && a.family != TAXI_ADDR_UNIX) *colon = '\0';
  if (text[0] == '[') {
    size_t n = strlen(text);
    if (n > 1 && text[n - 1] == ']') text[n - 1] = '\0';
    snprintf(out, cap, "%s", text + 1);
  } else {
    snprintf(out, cap, "%s", text);
  }
}

void jaws_stream_settle(struct jaws_stream_conn *sc,
                        taxi_stream_read_fn on_read, enum http_step step) {
  if (sc->closed) return;
  if (step == HTTP_CLOSE) {
    if (sc->reading) taxi_stream_read_stop(sc->stream);
    sc->reading = false;
    return;
  }
  if (sc->eof) {
    if (step != HTTP_BUSY && http_session_inflight(sc->sess) == 0)
      taxi_stream_end(sc->stream);
    return;
  }
  bool want =
      step != HTTP_BUSY && http_session_room(sc->sess) >= JAWS_READ_BUFFER;
  if (want && !sc->reading)
    sc->reading = taxi_stream_read_start(sc->stream, on_read) == 0;
  else if (!want && sc->reading) {
    taxi_stream_read_stop(sc->stream);
    sc->reading = false;
  }
}

void jaws_stream_read_done(struct jaws_stream_conn *sc,
                           taxi_stream_read_fn on_read, int status,
                           const void *data, size_t len) {
  enum http_step step;
  if (sc->closed) return; /* cannot happen once closed: defensive */
  if (status < 0) {
    sc->eof = true;
    sc->reading = false;
    step = http_session_process(sc->sess, jaws_now_ms());
  } else {
    step = http_session_feed(sc->sess, data, len, jaws_now_ms());
  }
  jaws_stream_settle(sc, on_read, step);
}

void jaws_stream_accepted(struct jaws_stream_conn *sc, taxi_stream_t *s) {
  taxi_tls_info_t info = {.size = sizeof info};
  sc->handshaking = taxi_tls_info(s, &info) == 0 && !info.handshake_done;
  sc->accepted_ms = jaws_now_ms();
}

bool jaws_stream_overdue(struct jaws_stream_conn *sc,
                         const struct jaws_server *srv, int64_t now_ms) {
  if (sc->closed) return false;
  if (sc->handshaking) {
    taxi_tls_info_t info = {.size = sizeof info};
    /* Asked here rather than told by on_handshake: the sweep is the one
     * reader, and it holds the connection's lock. */
    if (taxi_tls_info(sc->stream, &info) != 0 || info.handshake_done)
      sc->handshaking = false;
    else
      return now_ms - sc->accepted_ms >= (int64_t)srv->cfg.header_timeout_ms;
  }
  return http_session_expired(sc->sess, now_ms);
}

void jaws_stream_expire(struct jaws_stream_conn *sc,
                        taxi_stream_read_fn on_read) {
  if (sc->closed) return;
  if (sc->handshaking) {
    taxi_stream_close(sc->stream);
    return;
  }
  if (http_session_timeout(sc->sess) >= 0)
    jaws_stream_settle(sc, on_read, HTTP_CLOSE);
}
