/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/tls_openssl.c - the TLS engine over OpenSSL 3
 * (core/stream/tls_engine.h).  Each session is an SSL object between two
 * memory BIOs: the stream layer writes the ciphertext it read into one
 * and takes what is to be sent from the other, so OpenSSL never sees a
 * socket and the same code runs over every dispatcher and backend.
 *
 * A client context keeps the sessions the servers gave it (a ticket
 * arrives after the handshake in TLS 1.3, hence the new-session callback
 * rather than a look at the session once connected), one per host:port,
 * and offers the saved one when it connects there again.
 *
 * Calls OpenSSL and the ports' mutex; nothing of the wing.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/tls_engine.h"
#include "port.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#define CACHE_DEFAULT 64u

typedef struct cached {
  char *key;
  SSL_SESSION *sess;
} cached_t;

typedef struct ectx {
  SSL_CTX *ctx;
  taxi_tls_context_t *owner;
  unsigned char alpn[512]; /* the list in ALPN's wire format */
  unsigned alpn_len;
  bool verify, resume;
  taxi__mutex_t lock; /* the cache */
  cached_t *cache;
  unsigned ncache, next;
} ectx_t;

typedef struct sess {
  SSL *ssl;
  BIO *in, *out; /* ciphertext read from the peer; to send to it */
  ectx_t *ec;
  char *key; /* where its session is saved (a client's), or NULL */
} sess_t;

static const char *e_name(void) { return OpenSSL_version(OPENSSL_VERSION); }

/* The engine's last error as a sentence, its queue emptied. */
static void why_ossl(char *why, size_t cap, const char *what) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  if (r)
    snprintf(why, cap, "%s: %s", what, r);
  else
    snprintf(why, cap, "%s", what);
  ERR_clear_error();
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = taxi__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg) {
  ectx_t *ec = arg;
  unsigned char *sel;
  (void)ssl;
  if (ec->alpn_len == 0) return SSL_TLSEXT_ERR_NOACK;
  if (SSL_select_next_proto(&sel, outlen, ec->alpn, ec->alpn_len, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK; /* nothing in common: no ALPN */
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static int sni_select(SSL *ssl, int *alert, void *arg) {
  ectx_t *ec = arg;
  (void)alert;
  const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!name || !*name || !ec->owner->on_sni) return SSL_TLSEXT_ERR_OK;
  taxi_tls_context_t *c = ec->owner->on_sni(name, ec->owner->sni_arg);
  if (c && c != ec->owner && c->server && c->engine == ec->owner->engine)
    SSL_set_SSL_CTX(ssl, ((ectx_t *)c->ectx)->ctx);
  return SSL_TLSEXT_ERR_OK;
}

/* An ectx_t lives as long as its SSL_CTX, which a session chosen by an
 * SNI callback may hold after the taxi context that made it is gone (its
 * ALPN callback still reads the ectx_t): the SSL_CTX's last free frees
 * it, through the slot's free function. */
static void ectx_gone(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                      long argl, void *argp) {
  ectx_t *ec = ptr;
  (void)parent;
  (void)ad;
  (void)idx;
  (void)argl;
  (void)argp;
  if (!ec) return;
  for (unsigned i = 0; i < ec->ncache; i++) {
    taxi__free(ec->cache[i].key);
    if (ec->cache[i].sess) SSL_SESSION_free(ec->cache[i].sess);
  }
  taxi__free(ec->cache);
  taxi__mutex_destroy(&ec->lock);
  taxi__free(ec);
}

/* The slots of an SSL (its sess_t) and of an SSL_CTX (its ectx_t), taken
 * at the first context (two threads racing waste a slot, no more). */
static atomic_int ex_slot = -1, ctx_slot = -1;
#define ex_index atomic_load_explicit(&ex_slot, memory_order_acquire)
#define ctx_index atomic_load_explicit(&ctx_slot, memory_order_acquire)
static void ex_init(void) {
  if (ex_index >= 0 && ctx_index >= 0) return;
  int want = -1;
  int idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, ectx_gone);
  atomic_compare_exchange_strong(&ctx_slot, &want, idx);
  want = -1;
  idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
  atomic_compare_exchange_strong(&ex_slot, &want, idx);
}

/* A client got a session it may resume: keep it under its host:port. */
static int session_saved(SSL *ssl, SSL_SESSION *s) {
  sess_t *ss = SSL_get_ex_data(ssl, ex_index);
  if (!ss || !ss->key || !ss->ec->resume) return 0;
  ectx_t *ec = ss->ec;
  taxi__mutex_lock(&ec->lock);
  cached_t *slot = NULL;
  for (unsigned i = 0; i < ec->ncache && !slot; i++)
    if (ec->cache[i].key && strcmp(ec->cache[i].key, ss->key) == 0)
      slot = &ec->cache[i];
  if (!slot) {
    char *k = dup_str(ss->key);
    if (!k) {
      taxi__mutex_unlock(&ec->lock);
      return 0;
    }
    slot = &ec->cache[ec->next]; /* the oldest goes */
    ec->next = (ec->next + 1) % ec->ncache;
    taxi__free(slot->key);
    slot->key = k;
  }
  if (slot->sess) SSL_SESSION_free(slot->sess);
  slot->sess = s;
  taxi__mutex_unlock(&ec->lock);
  return 1; /* the cache holds s's reference now */
}

static int readable(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return TAXI_ENOENT;
  fclose(f);
  return 0;
}

static int e_ctx_new(taxi_tls_context_t *c, const taxi_tls_options_t *o,
                     char *why, size_t cap) {
  ex_init();
  if (ex_index < 0 || ctx_index < 0) {
    snprintf(why, cap, "SSL_get_ex_new_index failed");
    return TAXI_ENOMEM;
  }
  ectx_t *ec = taxi__calloc(1, sizeof *ec);
  if (!ec) return TAXI_ENOMEM;
  ec->owner = c;
  ec->verify = !c->server && !(o->flags & TAXI_TLS_NO_VERIFY);
  ec->resume = !c->server && !(o->flags & TAXI_TLS_NO_RESUME);
  ec->ncache = o->session_cache ? o->session_cache : CACHE_DEFAULT;
  int rc = TAXI_ETLS;
  if (taxi__mutex_init(&ec->lock) < 0) {
    taxi__free(ec);
    return TAXI_ENOMEM;
  }
  ec->cache = taxi__calloc(ec->ncache, sizeof *ec->cache);
  ec->ctx = SSL_CTX_new(c->server ? TLS_server_method() : TLS_client_method());
  if (!ec->cache || !ec->ctx ||
      SSL_CTX_set_ex_data(ec->ctx, ctx_index, ec) != 1) {
    rc = TAXI_ENOMEM;
    goto fail;
  }
  SSL_CTX *x = ec->ctx;
  SSL_CTX_set_min_proto_version(x, TLS1_2_VERSION);
  SSL_CTX_set_options(x, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(x, SSL_MODE_RELEASE_BUFFERS);
  if (o->alpn)
    ec->alpn_len =
        (unsigned)taxi__tls_alpn_wire(o->alpn, ec->alpn, sizeof ec->alpn);
  if (c->server) {
    const char *bad = readable(o->cert_file) < 0  ? o->cert_file
                      : readable(o->key_file) < 0 ? o->key_file
                                                  : NULL;
    if (bad) {
      snprintf(why, cap, "cannot read %s", bad);
      rc = TAXI_ENOENT;
      goto fail;
    }
    if (SSL_CTX_use_certificate_chain_file(x, o->cert_file) != 1) {
      why_ossl(why, cap, "o.cert_file: not a certificate chain");
      goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(x, o->key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(x) != 1) {
      why_ossl(why, cap, "o.key_file: not the certificate's key");
      goto fail;
    }
    SSL_CTX_set_alpn_select_cb(x, alpn_select, ec);
    SSL_CTX_set_tlsext_servername_callback(x, sni_select);
    SSL_CTX_set_tlsext_servername_arg(x, ec);
  } else {
    if (o->ca_file || o->ca_dir) {
      if ((o->ca_file && readable(o->ca_file) < 0)) {
        snprintf(why, cap, "cannot read %s", o->ca_file);
        rc = TAXI_ENOENT;
        goto fail;
      }
      if (SSL_CTX_load_verify_locations(x, o->ca_file, o->ca_dir) != 1) {
        why_ossl(why, cap, "o.ca_file, o.ca_dir: no trust store there");
        goto fail;
      }
    } else if (SSL_CTX_set_default_verify_paths(x) != 1) {
      why_ossl(why, cap, "the system's trust store");
      goto fail;
    }
    SSL_CTX_set_verify(x, ec->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (ec->alpn_len &&
        SSL_CTX_set_alpn_protos(x, ec->alpn, ec->alpn_len) != 0) {
      why_ossl(why, cap, "o.alpn");
      goto fail;
    }
    SSL_CTX_set_session_cache_mode(
        x, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(x, session_saved);
  }
  c->ectx = ec;
  return 0;
fail:
  if (ec->ctx && SSL_CTX_get_ex_data(ec->ctx, ctx_index) == ec) {
    SSL_CTX_free(ec->ctx); /* and ec, through ectx_gone */
    return rc;
  }
  if (ec->ctx) SSL_CTX_free(ec->ctx);
  taxi__free(ec->cache);
  taxi__mutex_destroy(&ec->lock);
  taxi__free(ec);
  return rc;
}

/* The context's hold on its SSL_CTX (the sessions may hold more). */
static void e_ctx_free(void *p) {
  ectx_t *ec = p;
  SSL_CTX_free(ec->ctx);
}

static bool is_ip(const char *name) {
  ASN1_OCTET_STRING *a = a2i_IPADDRESS(name);
  if (!a) return false;
  ASN1_OCTET_STRING_free(a);
  return true;
}

static void e_session_free(void *p) {
  sess_t *ss = p;
  if (!ss) return;
  if (ss->ssl) SSL_free(ss->ssl); /* and its BIOs */
  taxi__free(ss->key);
  taxi__free(ss);
}

static int e_session_new(void **out, taxi_tls_context_t *c, const char *name,
                         const char *key, char *why, size_t cap) {
  ectx_t *ec = c->ectx;
  sess_t *ss = taxi__calloc(1, sizeof *ss);
  if (!ss) return TAXI_ENOMEM;
  ss->ec = ec;
  ERR_clear_error();
  ss->ssl = SSL_new(ec->ctx);
  ss->in = BIO_new(BIO_s_mem());
  ss->out = BIO_new(BIO_s_mem());
  if (!ss->ssl || !ss->in || !ss->out) {
    if (ss->in) BIO_free(ss->in);
    if (ss->out) BIO_free(ss->out);
    ss->in = ss->out = NULL;
    e_session_free(ss);
    return TAXI_ENOMEM;
  }
  /* An empty input is "more to come", never the end: the end of the
   * stream is the stream layer's to judge (close_notify or truncation). */
  BIO_set_mem_eof_return(ss->in, -1);
  BIO_set_mem_eof_return(ss->out, -1);
  SSL_set_bio(ss->ssl, ss->in, ss->out);
  SSL_set_ex_data(ss->ssl, ex_index, ss);
  if (c->server) {
    SSL_set_accept_state(ss->ssl);
  } else {
    SSL_set_connect_state(ss->ssl);
    int ok = 1;
    if (name && is_ip(name)) {
      if (ec->verify)
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ss->ssl), name);
    } else if (name) {
      ok = SSL_set_tlsext_host_name(ss->ssl, name) == 1 &&
           (!ec->verify || SSL_set1_host(ss->ssl, name) == 1);
    }
    if (ok != 1) {
      why_ossl(why, cap, "the server name");
      e_session_free(ss);
      return TAXI_EINVAL;
    }
    if (key && ec->resume) {
      ss->key = dup_str(key);
      if (!ss->key) {
        e_session_free(ss);
        return TAXI_ENOMEM;
      }
      taxi__mutex_lock(&ec->lock);
      for (unsigned i = 0; i < ec->ncache; i++)
        if (ec->cache[i].key && strcmp(ec->cache[i].key, key) == 0) {
          if (ec->cache[i].sess) SSL_set_session(ss->ssl, ec->cache[i].sess);
          break;
        }
      taxi__mutex_unlock(&ec->lock);
    }
  }
  *out = ss;
  return 0;
}

/* Why the last operation of ss failed: its code, and the sentence. */
static int failed(sess_t *ss, int ret, char *why, size_t cap) {
  int err = SSL_get_error(ss->ssl, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    return TAXI_EAGAIN;
  }
  long v = SSL_get_verify_result(ss->ssl);
  if (v != X509_V_OK && !SSL_is_server(ss->ssl) && ss->ec->verify) {
    snprintf(why, cap, "certificate verify failed: %s",
             X509_verify_cert_error_string(v));
    ERR_clear_error();
    return TAXI_EBADCERT;
  }
  why_ossl(why, cap, err == SSL_ERROR_SSL ? "TLS" : "TLS (no reason given)");
  return TAXI_ETLS;
}

static int e_handshake(void *p, char *why, size_t cap) {
  sess_t *ss = p;
  ERR_clear_error();
  int r = SSL_do_handshake(ss->ssl);
  return r == 1 ? 0 : failed(ss, r, why, cap);
}

static int64_t e_read(void *p, void *buf, size_t cap, char *why, size_t wcap) {
  sess_t *ss = p;
  size_t got = 0;
  ERR_clear_error();
  int r = SSL_read_ex(ss->ssl, buf, cap, &got);
  if (r == 1) return (int64_t)got;
  if (SSL_get_error(ss->ssl, r) == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return 0;
  }
  return failed(ss, r, why, wcap);
}

static int e_write(void *p, const void *buf, size_t len, char *why,
                   size_t cap) {
  sess_t *ss = p;
  size_t done = 0;
  ERR_clear_error();
  /* Into a memory BIO, which never refuses: all or an error. */
  int r = SSL_write_ex(ss->ssl, buf, len, &done);
  if (r == 1 && done == len) return 0;
  int rc = failed(ss, r, why, cap);
  return rc == TAXI_EAGAIN ? TAXI_ETLS : rc;
}

static int e_feed(void *p, const void *buf, size_t len) {
  sess_t *ss = p;
  while (len > 0) {
    int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
    int w = BIO_write(ss->in, buf, chunk);
    if (w <= 0) return TAXI_ENOMEM;
    buf = (const char *)buf + w;
    len -= (size_t)w;
  }
  return 0;
}

static size_t e_take(void *p, void *buf, size_t cap) {
  sess_t *ss = p;
  size_t got = 0;
  if (BIO_ctrl_pending(ss->out) == 0) return 0;
  if (BIO_read_ex(ss->out, buf, cap, &got) != 1) return 0;
  return got;
}

static int e_close_notify(void *p) {
  sess_t *ss = p;
  ERR_clear_error();
  int r = SSL_shutdown(ss->ssl); /* 0: sent, the peer's not yet come */
  if (r < 0) {
    ERR_clear_error();
    return TAXI_ETLS;
  }
  return 0;
}

static void e_info(void *p, taxi_tls_info_t *info) {
  sess_t *ss = p;
  SSL *s = ss->ssl;
  info->handshake_done = SSL_is_init_finished(s) ? 1 : 0;
  info->resumed = SSL_session_reused(s) ? 1 : 0;
  info->server = SSL_is_server(s) ? 1 : 0;
  const char *v = info->handshake_done ? SSL_get_version(s) : NULL;
  taxi__tls_copy_text(info->version, sizeof info->version, v,
                      v ? strlen(v) : 0);
  const char *c = info->handshake_done ? SSL_get_cipher_name(s) : NULL;
  taxi__tls_copy_text(info->cipher, sizeof info->cipher, c, c ? strlen(c) : 0);
  const unsigned char *a = NULL;
  unsigned alen = 0;
  SSL_get0_alpn_selected(s, &a, &alen);
  taxi__tls_copy_text(info->alpn, sizeof info->alpn, (const char *)a, alen);
  const char *n = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
  taxi__tls_copy_text(info->server_name, sizeof info->server_name, n,
                      n ? strlen(n) : 0);
}

const taxi__tls_engine_t taxi__tls_openssl = {
    .name = e_name,
    .ctx_new = e_ctx_new,
    .ctx_free = e_ctx_free,
    .session_new = e_session_new,
    .session_free = e_session_free,
    .handshake = e_handshake,
    .read = e_read,
    .write = e_write,
    .feed = e_feed,
    .take = e_take,
    .close_notify = e_close_notify,
    .info = e_info,
};
