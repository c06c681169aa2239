/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/tls_context.c - TLS contexts (taxi/tls.h): their options
 * checked, their references counted, the engine's part made and freed
 * through the engine's table (core/stream/tls_engine.h).  Calls the
 * engine and common/ only.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/stream/tls_engine.h"

#include <string.h>

#ifdef TAXI_HAVE_OPENSSL
extern const taxi__tls_engine_t taxi__tls_openssl;
#elif defined(TAXI_HAVE_SCHANNEL)
extern const taxi__tls_engine_t taxi__tls_schannel; /* ports/win32 */
#endif

const taxi__tls_engine_t *taxi__tls_engine(void) {
#ifdef TAXI_HAVE_OPENSSL
  return &taxi__tls_openssl;
#elif defined(TAXI_HAVE_SCHANNEL)
  return &taxi__tls_schannel;
#else
  return NULL;
#endif
}

const char *taxi_tls_engine(void) {
  const taxi__tls_engine_t *e = taxi__tls_engine();
  return e ? e->name() : NULL;
}

void taxi_tls_options_init(taxi_tls_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

/* An ALPN list: comma-separated names of 1 to 255 bytes. */
static bool alpn_ok(const char *list) {
  size_t len = 0;
  for (const char *p = list;; p++) {
    if (*p == ',' || *p == '\0') {
      if (len == 0 || len > 255) return false;
      if (*p == '\0') return true;
      len = 0;
    } else {
      len++;
    }
  }
}

static int create(taxi_tls_context_t **out, const taxi_tls_options_t *in,
                  bool server, const char *fn) {
  taxi_tls_options_t o;
  if (!out) return taxi__refuse(TAXI_EINVAL, "%s: out: NULL", fn);
  taxi_tls_options_init(&o);
  if (!in) return taxi__refuse(TAXI_EINVAL, "%s: o: NULL", fn);
  if (taxi__options_copy(&o, sizeof o, in, sizeof o, fn,
                         "taxi_tls_options_init") < 0)
    return TAXI_EINVAL;
  unsigned known = TAXI_TLS_NO_VERIFY | TAXI_TLS_NO_RESUME;
  if (o.flags & ~known)
    return taxi__refuse(TAXI_EINVAL, "%s: o.flags: unknown bits 0x%x", fn,
                        o.flags & ~known);
  if (server && (!o.cert_file || !o.key_file))
    return taxi__refuse(TAXI_EINVAL,
                        "%s: o.%s: NULL (a server needs its certificate "
                        "chain and its key)",
                        fn, !o.cert_file ? "cert_file" : "key_file");
  if (o.alpn && !alpn_ok(o.alpn))
    return taxi__refuse(TAXI_EINVAL,
                        "%s: o.alpn: comma-separated names of 1 to 255 "
                        "bytes; got \"%.64s\"",
                        fn, o.alpn);
  const taxi__tls_engine_t *e = taxi__tls_engine();
  if (!e)
    return taxi__refuse(TAXI_ENOTSUP,
                        "%s: taxi was built without a TLS engine "
                        "(configure --with-tls)",
                        fn);
  taxi_tls_context_t *c = taxi__calloc(1, sizeof *c);
  if (!c) return TAXI_ENOMEM;
  atomic_init(&c->refs, 1);
  c->server = server;
  c->verify = !server && !(o.flags & TAXI_TLS_NO_VERIFY);
  c->engine = e;
  c->on_sni = server ? o.on_sni : NULL;
  c->sni_arg = o.sni_arg;
  char why[256] = "";
  int rc = e->ctx_new(c, &o, why, sizeof why);
  if (rc < 0) {
    taxi__free(c);
    return taxi__refuse(rc, "%s: %s", fn, why[0] ? why : "the engine failed");
  }
  *out = c;
  return 0;
}

int taxi_tls_server_create(taxi_tls_context_t **out,
                           const taxi_tls_options_t *o) {
  return create(out, o, true, "taxi_tls_server_create");
}

int taxi_tls_client_create(taxi_tls_context_t **out,
                           const taxi_tls_options_t *o) {
  return create(out, o, false, "taxi_tls_client_create");
}

int taxi_tls_context_ref(taxi_tls_context_t *c) {
  if (!c) return TAXI_EINVAL;
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  return 0;
}

int taxi_tls_context_unref(taxi_tls_context_t *c) {
  if (!c) return TAXI_EINVAL;
  /* Release: what this holder did with c happens before the free. */
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
    c->engine->ctx_free(c->ectx);
    taxi__free(c);
  }
  return 0;
}

int taxi_tls_context_is_server(const taxi_tls_context_t *c) {
  if (!c) return TAXI_EINVAL;
  return c->server ? 1 : 0;
}
