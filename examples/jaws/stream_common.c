/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/stream_common.c - see stream_common.h.
 */
#include "stream_common.h"

#include "jaws_os.h"

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
