/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/tls_check.c - see tls_check.h.  The certificate is made with
 * OpenSSL's API rather than by running openssl: the fuzzer starts this
 * once per process and must start fast.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "config.h"

#include "tls_check.h"

#include "core/stream/tls_engine.h"
#include "taxi/error.h"
#include "taxi/tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], cert_path[96], key_path[96];
static taxi_tls_context_t *server_ctx, *client_ctx;

static int fail(char *why, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return -1;
}

/* A P-256 key and a certificate for "localhost" signed by it. */
static int make_cert(EVP_PKEY **key, X509 **cert) {
  *key = EVP_EC_gen("P-256");
  *cert = X509_new();
  if (!*key || !*cert) return -1;
  X509_NAME *nm = X509_get_subject_name(*cert);
  if (X509_set_version(*cert, 2) != 1 ||
      ASN1_INTEGER_set(X509_get_serialNumber(*cert), 1) != 1 ||
      !X509_gmtime_adj(X509_getm_notBefore(*cert), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(*cert), 86400L * 3650) ||
      X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
                                 (const unsigned char *)"localhost", -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(*cert, nm) != 1 || X509_set_pubkey(*cert, *key) != 1)
    return -1;
  /* Subject alternative name: what a verifying client checks. */
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, *cert, *cert, NULL, NULL, 0);
  X509_EXTENSION *ext =
      X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:localhost");
  if (!ext) return -1;
  int ok = X509_add_ext(*cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1 || X509_sign(*cert, *key, EVP_sha256()) <= 0) return -1;
  return 0;
}

static int write_pem(const char *path, EVP_PKEY *key, X509 *cert) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
               : PEM_write_X509(f, cert);
  if (fclose(f) != 0) ok = 0;
  return ok == 1 ? 0 : -1;
}

int tls_check_init(char *why, size_t cap) {
  snprintf(dir, sizeof dir, "%s", "/tmp/taxi-tls-fuzz-XXXXXX");
  if (!mkdtemp(dir)) return fail(why, cap, "mkdtemp failed");
  snprintf(cert_path, sizeof cert_path, "%s/cert.pem", dir);
  snprintf(key_path, sizeof key_path, "%s/key.pem", dir);
  EVP_PKEY *key = NULL;
  X509 *cert = NULL;
  int rc = make_cert(&key, &cert);
  if (rc == 0) rc = write_pem(key_path, key, NULL);
  if (rc == 0) rc = write_pem(cert_path, NULL, cert);
  EVP_PKEY_free(key);
  X509_free(cert);
  if (rc < 0) {
    tls_check_fini();
    return fail(why, cap, "the certificate could not be made or written");
  }
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = cert_path;
  o.key_file = key_path;
  o.alpn = "h2,http/1.1";
  rc = taxi_tls_server_create(&server_ctx, &o);
  if (rc < 0) {
    tls_check_fini();
    return fail(why, cap, "taxi_tls_server_create: %s", taxi_strerror(rc));
  }
  taxi_tls_options_init(&o);
  o.ca_file = cert_path;
  o.alpn = "http/1.1,h2";
  rc = taxi_tls_client_create(&client_ctx, &o);
  if (rc < 0) {
    tls_check_fini();
    return fail(why, cap, "taxi_tls_client_create: %s", taxi_strerror(rc));
  }
  return 0;
}

const char *tls_check_cert_file(void) { return cert_path; }
const char *tls_check_key_file(void) { return key_path; }

void tls_check_fini(void) {
  if (server_ctx) taxi_tls_context_unref(server_ctx);
  if (client_ctx) taxi_tls_context_unref(client_ctx);
  server_ctx = client_ctx = NULL;
  if (!dir[0]) return;
  (void)unlink(cert_path);
  (void)unlink(key_path);
  (void)rmdir(dir);
  dir[0] = '\0';
}

/* What the session sends is taken as the filter takes it; its size is all
 * that can be checked. */
static int drain(const taxi__tls_engine_t *e, void *ss, char *why, size_t cap) {
  static unsigned char out[17 << 10];
  for (int i = 0; i < 1024; i++) {
    size_t got = e->take(ss, out, sizeof out);
    if (got == 0) return 0;
    if (got > sizeof out)
      return fail(why, cap, "take: %zu bytes into %zu", got, sizeof out);
  }
  return fail(why, cap, "take: never empties");
}

/* One session of ctx fed data in pieces of step bytes. */
static int run(taxi_tls_context_t *ctx, const unsigned char *data, size_t n,
               size_t step, char *why, size_t cap) {
  const taxi__tls_engine_t *e = ctx->engine;
  const char *side = ctx->server ? "server" : "client";
  char ewhy[256] = "";
  void *ss = NULL;
  int rc =
      e->session_new(&ss, ctx, ctx->server ? NULL : "localhost",
                     ctx->server ? NULL : "localhost:443", ewhy, sizeof ewhy);
  if (rc < 0) return fail(why, cap, "%s: session_new: %d", side, rc);
  static unsigned char plain[16 << 10];
  bool hs_done = false, failed = false;
  int result = 0;
  size_t pos = 0;
  for (unsigned rounds = 0;; rounds++) {
    if (rounds > 4 * n + 64) {
      result = fail(why, cap, "%s: no progress after %u rounds", side, rounds);
      break;
    }
    int64_t r;
    bool reading = hs_done;
    if (!hs_done) {
      r = e->handshake(ss, ewhy, sizeof ewhy);
      if (r != 0 && r != TAXI_EAGAIN && r != TAXI_ETLS && r != TAXI_EBADCERT) {
        result = fail(why, cap, "%s: handshake: %lld", side, (long long)r);
        break;
      }
      if (r == 0) hs_done = true;
    } else {
      r = e->read(ss, plain, sizeof plain, ewhy, sizeof ewhy);
      if (r > (int64_t)sizeof plain) {
        result = fail(why, cap, "%s: read: %lld into %zu", side, (long long)r,
                      sizeof plain);
        break;
      }
      if (r < 0 && r != TAXI_EAGAIN && r != TAXI_ETLS) {
        result = fail(why, cap, "%s: read: %lld", side, (long long)r);
        break;
      }
    }
    if (drain(e, ss, why, cap) < 0) {
      result = -1;
      break;
    }
    if (r == TAXI_ETLS || r == TAXI_EBADCERT) {
      failed = true;
      if (!ewhy[0]) {
        result = fail(why, cap, "%s: failed (%lld) without a reason", side,
                      (long long)r);
      }
      break;
    }
    if (reading && r == 0) break; /* close_notify: the end of the stream */
    if (r == TAXI_EAGAIN) {
      if (pos == n) break; /* all fed: the peer would send more */
      size_t len = n - pos < step ? n - pos : step;
      if (e->feed(ss, data + pos, len) != 0) {
        result = fail(why, cap, "%s: feed refused %zu bytes", side, len);
        break;
      }
      pos += len;
    }
  }
  if (result == 0) {
    taxi_tls_info_t info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    e->info(ss, &info);
    if (hs_done && !info.handshake_done)
      result = fail(why, cap, "%s: done, but info says not", side);
    /* Nothing after a failure: the filter reads no more, and the engine
     * must not hand plaintext over a broken session either. */
    if (result == 0 && failed) {
      int64_t r = e->read(ss, plain, sizeof plain, ewhy, sizeof ewhy);
      if (r > 0)
        result = fail(why, cap, "%s: %lld bytes read after a failure", side,
                      (long long)r);
      if (result == 0 && !hs_done && e->handshake(ss, ewhy, sizeof ewhy) == 0)
        result = fail(why, cap, "%s: the handshake done after a failure", side);
    }
    /* A stream closing: close_notify queued and taken, whatever state. */
    if (result == 0 && hs_done && !failed) {
      int c = e->close_notify(ss);
      if (c != 0 && c != TAXI_ETLS)
        result = fail(why, cap, "%s: close_notify: %d", side, c);
      if (result == 0) result = drain(e, ss, why, cap);
    }
  }
  e->session_free(ss);
  return result;
}

int tls_check_input(const unsigned char *data, size_t n, char *why,
                    size_t cap) {
  if (!server_ctx || !client_ctx)
    return fail(why, cap, "tls_check_init was not called");
  size_t step = n ? (size_t)data[0] % 97 + 1 : 1;
  taxi_tls_context_t *both[2] = {server_ctx, client_ctx};
  for (int i = 0; i < 2; i++) {
    if (run(both[i], data, n, n ? n : 1, why, cap) < 0) return -1;
    if (step < n && run(both[i], data, n, step, why, cap) < 0) return -1;
  }
  return 0;
}
