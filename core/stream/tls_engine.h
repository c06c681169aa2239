/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/tls_engine.h - what the stream layer asks of a TLS engine:
 * a small table of operations on contexts and sessions, so that another
 * engine (SChannel on Windows) can plug in beside OpenSSL's
 * (core/stream/tls_openssl.c).
 *
 * An engine never touches a socket.  A session is fed the ciphertext the
 * stream read (feed), hands back plaintext (read), takes plaintext
 * (write) and hands over the ciphertext to send (take); the stream layer
 * moves the bytes (core/stream/stream_tls.c).  A session is used by one
 * thread at a time (under its stream's lock); a context by any number.
 *
 * Failures carry the engine's words: every operation that can fail is
 * given `why` (cap bytes), where it writes a sentence on failure.
 */
#ifndef TAXI_CORE_TLS_ENGINE_H
#define TAXI_CORE_TLS_ENGINE_H

#include "taxi/tls.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

typedef struct taxi__tls_engine taxi__tls_engine_t;

/* A context: what core/stream/tls_context.c keeps around the engine's. */
struct taxi_tls_context {
  atomic_uint refs;
  bool server;
  bool verify; /* a client that checks the server's certificate */
  const taxi__tls_engine_t *engine;
  void *ectx; /* the engine's */
  taxi_tls_sni_fn on_sni;
  void *sni_arg;
};

struct taxi__tls_engine {
  const char *(*name)(void);
  /* A context for c (c->server says which), from o (checked already):
   * 0 and c->ectx set, or TAXI_ENOENT, TAXI_ETLS, TAXI_ENOMEM with why. */
  int (*ctx_new)(taxi_tls_context_t *c, const taxi_tls_options_t *o, char *why,
                 size_t cap);
  void (*ctx_free)(void *ectx);
  /* A session of context c.  A client's: name (NULL: none, with
   * verification off) sent as SNI unless an IP address, and checked
   * against the certificate unless c verifies nothing; cache_key (NULL:
   * none) names the saved session to offer, and where to save the new
   * one.  0 and *out, or an error with why. */
  int (*session_new)(void **out, taxi_tls_context_t *c, const char *name,
                     const char *cache_key, char *why, size_t cap);
  void (*session_free)(void *ss);
  /* A step of the handshake: 0 done, TAXI_EAGAIN (needs more input), or
   * TAXI_ETLS / TAXI_EBADCERT with why. */
  int (*handshake)(void *ss, char *why, size_t cap);
  /* Plaintext into buf: bytes (> 0), 0 (the peer's close_notify),
   * TAXI_EAGAIN (needs more input), or TAXI_ETLS with why. */
  int64_t (*read)(void *ss, void *buf, size_t cap, char *why, size_t wcap);
  /* Encrypt all len plaintext bytes: 0, or TAXI_ETLS / TAXI_ENOMEM. */
  int (*write)(void *ss, const void *buf, size_t len, char *why, size_t cap);
  /* Ciphertext the stream read: 0, or TAXI_ENOMEM. */
  int (*feed)(void *ss, const void *buf, size_t len);
  /* Ciphertext to send: up to cap bytes into buf; how many (0: none). */
  size_t (*take)(void *ss, void *buf, size_t cap);
  /* Queue the close_notify alert: 0, or TAXI_ETLS. */
  int (*close_notify)(void *ss);
  /* What was negotiated (info->size checked by the caller: all fields
   * are written). */
  void (*info)(void *ss, taxi_tls_info_t *info);
};

/* "a,bc" (checked by the context's create) into ALPN's wire format,
 * length-prefixed names, in out[0 .. cap): its length.  Names that do
 * not fit are left out. */
static inline size_t taxi__tls_alpn_wire(const char *list, unsigned char *out,
                                         size_t cap) {
  size_t n = 0;
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (n + 1 + len > cap) break;
    out[n++] = (unsigned char)len;
    memcpy(out + n, p, len);
    n += len;
    p += len + (end ? 1 : 0);
  }
  return n;
}

/* len bytes of from (NULL: none) as a string in to[0 .. cap), cut to fit:
 * the fields of taxi_tls_info_t. */
static inline void taxi__tls_copy_text(char *to, size_t cap, const char *from,
                                       size_t len) {
  if (!from) len = 0;
  if (len >= cap) len = cap - 1;
  if (len) memcpy(to, from, len);
  to[len] = '\0';
}

/* The engine built in, NULL without one (core/stream/tls_context.c). */
const taxi__tls_engine_t *taxi__tls_engine(void);

#endif /* TAXI_CORE_TLS_ENGINE_H */
