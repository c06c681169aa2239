/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_tls.c - the TLS filter of a stream: where the state
 * machine (core/stream/stream.c) would read from, write to, send a file
 * on or shut down the driver, a TLS stream comes here, and this file
 * moves the bytes between the driver and the engine
 * (core/stream/tls_engine.h).
 *
 * The seam.  The state machine asks the driver for bytes (read) and
 * offers it the head of the queue (write, sendfile), the same calls under
 * a reactor and a proactor; a driver may complete them at once or later
 * (a proactor's operation returns its result when the same head is
 * offered again).  The filter sits on those calls: it reads ciphertext
 * with the driver's read and feeds the engine, and hands plaintext up in
 * a buffer of its own (pbuf); it encrypts the queue's head into the
 * engine and sends the ciphertext from a buffer of its own (cbuf), which
 * does not change while an operation may be reading it.  The plaintext
 * records are reported done (to the state machine: bytes written) once
 * their ciphertext has gone out, so the watermarks, write callbacks and
 * timeouts mean what they mean on a plain stream.  A plain stream never
 * comes here: its cost is one test of s->tls per call.
 *
 * The engine writes when it reads (handshake messages, alerts) and needs
 * bytes when the application is not reading (a handshake): two stream
 * flags tell the driver to watch for them (TAXI__S_TLS_IN, TAXI__S_TLS_OUT),
 * and the state machine flushes at every round.
 *
 * Called by stream.c, with the stream's lock held (but attach and
 * detach, at the stream's making and release); calls the driver through
 * its table, the engine through its, tls_context.c's references, and the
 * ports.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/stream/io_impl.h"
#include "core/stream/tls_engine.h"

#include <stdio.h>
#include <string.h>

/* Ciphertext sent at a time: one full record and its overhead; and the
 * plaintext encrypted at a time (one record). */
#define CCAP ((size_t)17 << 10)
#define PLAIN_STEP ((size_t)16 << 10)

struct taxi__tls {
  taxi_tls_context_t *ctx;
  const taxi__tls_engine_t *e;
  void *ss;   /* the engine's session, made at the first round */
  char *name; /* a client's server name, or NULL */
  void (*on_handshake)(taxi_stream_t *s, int status);
  bool hs_done, failed, notify_sent;
  size_t owed;         /* plaintext in the engine, not yet reported */
  unsigned char *cbuf; /* ciphertext going out: cbuf[cpos, cpos + clen) */
  size_t cpos, clen;
  unsigned char *pbuf; /* plaintext out of the engine (rcap bytes) */
  char why[256];
};

int taxi__tls_attach(taxi_stream_t *s, const taxi_stream_options_t *o,
                     const char *where) {
  taxi_tls_context_t *c = o->tls;
  const char *name = o->tls_server_name;
  if (!c->server && !name && c->verify)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.tls_server_name: NULL, and no host name to "
                        "verify the server's certificate against (or "
                        "TAXI_TLS_NO_VERIFY)",
                        where);
  size_t nlen = name && !c->server ? strlen(name) + 1 : 0;
  size_t head = (sizeof(struct taxi__tls) + 15) & ~(size_t)15;
  struct taxi__tls *t = taxi__malloc(head + CCAP + s->rcap + nlen);
  if (!t) return TAXI_ENOMEM;
  memset(t, 0, sizeof *t);
  t->cbuf = (unsigned char *)t + head;
  t->pbuf = t->cbuf + CCAP;
  if (nlen) {
    t->name = (char *)t->pbuf + s->rcap;
    memcpy(t->name, name, nlen);
  }
  t->ctx = c;
  t->e = c->engine;
  t->on_handshake = o->on_handshake;
  taxi_tls_context_ref(c);
  s->tls = t;
  return 0;
}

void taxi__tls_detach(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (!t) return;
  s->tls = NULL;
  if (t->ss) t->e->session_free(t->ss);
  taxi_tls_context_unref(t->ctx);
  taxi__free(t);
}

/* Close s for a TLS failure: why kept, the handshake told if it was not
 * over.  Returns rc.  Lock held, let go around the callback. */
static int tls_fail_locked(taxi_stream_t *s, int rc) {
  struct taxi__tls *t = s->tls;
  if (!t->why[0]) snprintf(t->why, sizeof t->why, "%s", taxi_strerror(rc));
  t->failed = true;
  if (!(s->flags & TAXI__S_CLOSE_REQ)) {
    s->reason = rc;
    s->flags |= TAXI__S_CLOSE_REQ;
  }
  /* The alert the engine made, if it can go at once: the peer learns
   * why (best effort; the stream closes all the same). */
  (void)taxi__tls_flush(s);
  if (!t->hs_done && t->on_handshake) {
    void (*fn)(taxi_stream_t *, int) = t->on_handshake;
    t->on_handshake = NULL;
    taxi__stream_unlock(s);
    fn(s, rc);
    taxi__stream_lock(s);
  }
  return rc;
}

/* Ciphertext the engine made: into cbuf if it is free, and the driver
 * told to watch for writing.  Lock held. */
static void take_output(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (t->clen == 0) {
    t->cpos = 0;
    t->clen = t->e->take(t->ss, t->cbuf, CCAP);
  }
  if (t->clen > 0) s->flags |= TAXI__S_TLS_OUT;
}

int64_t taxi__tls_flush(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (!t->ss) return 0;
  for (;;) {
    take_output(s);
    if (t->clen == 0) {
      s->flags &= ~TAXI__S_TLS_OUT;
      return 0;
    }
    taxi_buf_t b = {t->cbuf + t->cpos, t->clen};
    int64_t n = s->io->drv->write(s, &b, 1);
    /* A socket that fails while the handshake's messages go out fails
     * the handshake: its callback hears the error, as from a read
     * (tls_fail_locked marks the failure first, so its own flush of the
     * alert comes back here only to return). */
    if (n < 0 && n != TAXI_EAGAIN && !t->hs_done && !t->failed)
      return tls_fail_locked(s, (int)n);
    if (n < 0) return n;
    t->cpos += (size_t)n;
    t->clen -= (size_t)n;
  }
}

/* Ciphertext from the driver into the engine: 0 (fed), TAXI_EAGAIN (none
 * yet: the driver reports it), 0 bytes as `eof`, or an error. */
static int feed(taxi_stream_t *s, bool *eof) {
  struct taxi__tls *t = s->tls;
  s->rdata = s->rbuf; /* where a driver without buffers of its own reads */
  int64_t n = s->io->drv->read(s);
  if (n < 0) return (int)n;
  if (n == 0) {
    *eof = true;
    return 0;
  }
  return t->e->feed(t->ss, s->rdata, (size_t)n);
}

/* The engine's session, at the first round (a client is connected by
 * then, so its peer's port names the saved session). */
static int session_locked(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  char key[300];
  const char *k = NULL;
  if (!t->ctx->server && t->name) {
    snprintf(key, sizeof key, "%s:%u", t->name, taxi_addr_port(&s->peer));
    k = key;
  }
  return t->e->session_new(&t->ss, t->ctx, t->name, k, t->why, sizeof t->why);
}

void taxi__tls_round_locked(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (t->hs_done || t->failed) return;
  if (!t->ss) {
    int rc = session_locked(s);
    if (rc < 0) {
      tls_fail_locked(s, rc);
      return;
    }
  }
  for (;;) {
    int rc = t->e->handshake(t->ss, t->why, sizeof t->why);
    take_output(s);
    if (rc == 0) break;
    if (rc != TAXI_EAGAIN) {
      tls_fail_locked(s, rc);
      return;
    }
    bool eof = false;
    rc = feed(s, &eof);
    if (rc == TAXI_EAGAIN) {
      s->flags |= TAXI__S_TLS_IN;
      return;
    }
    if (eof) {
      snprintf(t->why, sizeof t->why,
               "the peer closed the connection during the handshake");
      rc = TAXI_ETLS;
    }
    if (rc < 0) {
      tls_fail_locked(s, rc);
      return;
    }
  }
  t->hs_done = true;
  s->flags &= ~TAXI__S_TLS_IN;
  if (t->on_handshake) {
    void (*fn)(taxi_stream_t *, int) = t->on_handshake;
    t->on_handshake = NULL;
    taxi__stream_unlock(s);
    fn(s, 0);
    taxi__stream_lock(s);
  }
}

int64_t taxi__tls_read(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (!t->hs_done) return TAXI_EAGAIN; /* the round's handshake reads */
  for (;;) {
    int64_t n = t->e->read(t->ss, t->pbuf, s->rcap, t->why, sizeof t->why);
    take_output(s);
    if (n > 0) {
      s->rdata = t->pbuf;
      return n;
    }
    if (n == 0) return 0; /* close_notify: the end of the stream */
    if (n != TAXI_EAGAIN) return tls_fail_locked(s, (int)n);
    bool eof = false;
    int rc = feed(s, &eof);
    if (eof) {
      snprintf(t->why, sizeof t->why,
               "the peer closed the connection without close_notify");
      return tls_fail_locked(s, TAXI_ETRUNCATED);
    }
    if (rc == TAXI_EAGAIN) return rc;
    if (rc < 0) return tls_fail_locked(s, rc);
  }
}

/* The plaintext encrypted last (owed), once its ciphertext is out. */
static int64_t settle(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  int64_t f = taxi__tls_flush(s);
  if (f < 0) return f;
  int64_t n = (int64_t)t->owed;
  t->owed = 0;
  return n;
}

int64_t taxi__tls_write(taxi_stream_t *s, const taxi_buf_t *bufs, size_t nb) {
  struct taxi__tls *t = s->tls;
  if (!t->hs_done) return TAXI_EAGAIN;
  /* Offered again while the ciphertext of its first bytes goes out, the
   * head is the same: those bytes are in the engine already. */
  if (t->owed == 0) {
    size_t total = 0;
    for (size_t i = 0; i < nb && total < PLAIN_STEP; i++) {
      size_t len = bufs[i].len;
      if (len > PLAIN_STEP - total) len = PLAIN_STEP - total;
      int rc = t->e->write(t->ss, bufs[i].base, len, t->why, sizeof t->why);
      if (rc < 0) return tls_fail_locked(s, rc);
      total += len;
    }
    t->owed = total;
  }
  return settle(s);
}

int64_t taxi__tls_sendfile(taxi_stream_t *s, taxi_handle_t file, int64_t off,
                           size_t len) {
  struct taxi__tls *t = s->tls;
  if (!t->hs_done) return TAXI_EAGAIN;
  if (t->owed == 0) {
    /* cbuf holds the file's bytes for a moment: it must be free. */
    int64_t f = taxi__tls_flush(s);
    if (f < 0) return f;
    size_t want = len < PLAIN_STEP ? len : PLAIN_STEP;
    int64_t n = taxi__file_read_at(file, t->cbuf, want, off);
    if (n < 0) return n;
    if (n == 0) return TAXI_EEOF; /* the file shrank */
    int rc = t->e->write(t->ss, t->cbuf, (size_t)n, t->why, sizeof t->why);
    if (rc < 0) return tls_fail_locked(s, rc);
    t->owed = (size_t)n;
  }
  return settle(s);
}

int taxi__tls_shutdown(taxi_stream_t *s) {
  struct taxi__tls *t = s->tls;
  if (!t->hs_done) return TAXI_EAGAIN;
  if (!t->notify_sent) {
    t->notify_sent = true;
    int rc = t->e->close_notify(t->ss);
    if (rc < 0) return rc;
  }
  int64_t f = taxi__tls_flush(s);
  return f < 0 ? (int)f : 0;
}

/* ---- what the application asks ------------------------------------------
 */

int taxi_tls_info(const taxi_stream_t *cs, taxi_tls_info_t *out) {
  if (!cs || !out || out->size < offsetof(taxi_tls_info_t, resumed))
    return taxi__refuse(TAXI_EINVAL, "taxi_tls_info: %s",
                        !cs    ? "s: NULL"
                        : !out ? "out: NULL"
                               : "out->size: too small (set it to "
                                 "sizeof(taxi_tls_info_t))");
  taxi_stream_t *s = (taxi_stream_t *)(uintptr_t)cs;
  taxi_tls_info_t full;
  memset(&full, 0, sizeof full);
  int rc = taxi__stream_lock_api(s, "taxi_tls_info");
  if (rc < 0) return rc;
  if (s->flags & TAXI__S_DEAD)
    rc = TAXI_EBADF;
  else if (!s->tls)
    rc = TAXI_ENOENT;
  else if (s->tls->ss)
    s->tls->e->info(s->tls->ss, &full);
  if (rc == 0 && s->tls && !s->tls->ss) full.server = s->tls->ctx->server;
  taxi__stream_unlock(s);
  if (rc < 0) return rc;
  size_t n = out->size < sizeof full ? out->size : sizeof full;
  full.size = n;
  memcpy(out, &full, n);
  return 0;
}

const char *taxi_tls_error_text(const taxi_stream_t *s) {
  if (!s || taxi__stream_foreign(s) || !s->tls) return "";
  return s->tls->why;
}
