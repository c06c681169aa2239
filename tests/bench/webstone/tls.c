/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.c - webstone --tls: the client side of TLS over net.c's non-blocking
 * sockets, with OpenSSL (the generator does not use taxi, so it measures
 * any server alike).  A connection's TLS state sits beside its descriptor;
 * a call that cannot go on says which readiness it waits for (a read may
 * need to write, and a write to read), so client.c watches the right one.
 *
 * The server's certificate is not verified: the generator measures, it
 * does not authenticate (the test scripts check verification with curl).
 * ALPN offers http/1.1.  With --tls-resume a client keeps the session of
 * its last connection and offers it on its next connect (a TLS 1.3 ticket
 * or a TLS 1.2 session), so a connection per request measures resumed
 * handshakes instead of full ones.
 */
#include "webstone.h"

#include <errno.h>
#include <string.h>

#ifdef WS_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>

static SSL_CTX *ctx;

int ws_tls_init(void) {
  static const unsigned char alpn[] = "\x08http/1.1";
  ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1) != 0) {
    fprintf(stderr, "webstone: --tls: cannot make a TLS context\n");
    return -1;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  /* A server that closes without close_notify ends the response as its
   * plain close would: the body's length was checked already. */
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  /* Sessions are kept per client (ws_tls_end), not in a shared cache;
   * the client mode makes OpenSSL take a TLS 1.3 ticket into the
   * connection's session as it arrives. */
  SSL_CTX_set_session_cache_mode(
      ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  return 0;
}

void ws_tls_cleanup(void) {
  SSL_CTX_free(ctx);
  ctx = NULL;
}

void *ws_tls_begin(int fd, void *session) {
  SSL *ssl = SSL_new(ctx);
  if (ssl == NULL) return NULL;
  SSL_set_connect_state(ssl);
  if (SSL_set_fd(ssl, fd) != 1 ||
      SSL_set_tlsext_host_name(ssl, "localhost") != 1 ||
      (session && SSL_set_session(ssl, session) != 1)) {
    SSL_free(ssl);
    return NULL;
  }
  return ssl;
}

/* What SSL_get_error says about rc: -EAGAIN with *want set, -EPIPE for
 * an orderly end, -EPROTO for a TLS failure, -errno for the socket's. */
static int outcome(SSL *ssl, int rc, int *want) {
  int e = SSL_get_error(ssl, rc);
  switch (e) {
    case SSL_ERROR_WANT_READ:
      *want = WS_EV_IN;
      return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
      *want = WS_EV_OUT;
      return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
      return -EPIPE;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      return errno ? -errno : -EPIPE;
    default:
      ERR_clear_error();
      return -EPROTO;
  }
}

int ws_tls_handshake(void *t, int *want) {
  int rc = SSL_do_handshake(t);
  return rc == 1 ? 0 : outcome(t, rc, want);
}

ssize_t ws_tls_send(void *t, const void *buf, size_t len, int *want) {
  size_t n = 0;
  int rc = SSL_write_ex(t, buf, len, &n);
  return rc == 1 ? (ssize_t)n : outcome(t, rc, want);
}

ssize_t ws_tls_recv(void *t, void *buf, size_t len, int *want) {
  size_t n = 0;
  int rc = SSL_read_ex(t, buf, len, &n);
  if (rc == 1) return (ssize_t)n;
  rc = outcome(t, rc, want);
  return rc == -EPIPE ? 0 : rc; /* close_notify: the end of the stream */
}

int ws_tls_resumed(void *t) { return SSL_session_reused(t); }

void ws_tls_end(void *t, void **session) {
  if (t == NULL) return;
  if (session) {
    SSL_SESSION *s = SSL_get1_session(t);
    if (s && SSL_SESSION_is_resumable(s)) {
      SSL_SESSION_free(*session);
      *session = s;
      /* Freeing a connection not shut down marks its session not
       * resumable (OpenSSL takes it for a failed one); the response was
       * read whole, so it ended well: say so without sending the alert. */
      SSL_set_shutdown(t, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    } else {
      SSL_SESSION_free(s);
    }
  }
  SSL_free(t);
}

void ws_tls_forget(void *session) { SSL_SESSION_free(session); }

#else /* no OpenSSL: --tls is refused */

int ws_tls_init(void) {
  fprintf(stderr, "webstone: --tls: built without OpenSSL\n");
  return -1;
}
void ws_tls_cleanup(void) {}
void *ws_tls_begin(int fd, void *session) {
  (void)fd;
  (void)session;
  return NULL;
}
int ws_tls_handshake(void *t, int *want) {
  (void)t;
  (void)want;
  return -EPROTO;
}
ssize_t ws_tls_send(void *t, const void *buf, size_t len, int *want) {
  (void)t;
  (void)buf;
  (void)len;
  (void)want;
  return -EPROTO;
}
ssize_t ws_tls_recv(void *t, void *buf, size_t len, int *want) {
  (void)t;
  (void)buf;
  (void)len;
  (void)want;
  return -EPROTO;
}
int ws_tls_resumed(void *t) {
  (void)t;
  return 0;
}
void ws_tls_end(void *t, void **session) {
  (void)t;
  (void)session;
}
void ws_tls_forget(void *session) { (void)session; }
#endif
