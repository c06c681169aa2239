/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/tls.h - TLS streams.  TLS is a stream option, not a second API: a
 * listener whose stream options name a server context accepts TLS
 * streams, and a connect whose options name a client context makes a TLS
 * client stream.  Their read callbacks see plaintext; write, write_ref,
 * sendfile (the file is read into the engine in pieces: a kernel cannot
 * send a file through user-space TLS), backpressure and watermarks,
 * timeouts, half-close (taxi_stream_shutdown sends the close_notify
 * alert, then shuts the socket's sending down), end and close behave as on
 * plain streams, under every dispatcher and backend.
 *
 *     taxi_tls_options_t to;
 *     taxi_tls_options_init(&to);
 *     to.cert_file = "server.pem";   // the chain, the server's first
 *     to.key_file = "server.key";
 *     taxi_tls_context_t *tls;
 *     taxi_tls_server_create(&tls, &to);
 *     taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
 *     so.tls = tls;                  // the listener takes a reference
 *     taxi_listener_options_t lo;
 *     taxi_listener_options_init(&lo);
 *     lo.stream = &so;
 *     taxi_listener_create(&l, io, "[::]:443", &lo, on_accept, NULL);
 *     taxi_tls_context_unref(tls);
 *
 * The engine.  OpenSSL 3 where taxi was built with it (configure
 * --with-tls=openssl, or found by default), or on Windows SChannel, the
 * system's (--with-tls=schannel, the default there without OpenSSL:
 * no ca_dir and no server on_sni, both TAXI_ENOTSUP; docs/windows.md);
 * taxi_tls_engine() names it.  Elsewhere
 * every create is TAXI_ENOTSUP.  The engine never touches a socket: the stream
 * layer reads the ciphertext (by whichever dispatcher and backend run the
 * context) and gives it to the engine, and queues what the engine
 * produces to the socket.
 *
 * Security defaults.  TLS 1.2 at least; the engine's default ciphers;
 * renegotiation refused (a peer asking for it fails, TAXI_ETLS); a client
 * verifies the server's certificate against its trust store and the name
 * it connected to (the host of the connect's address, or
 * taxi_stream_options_t.tls_server_name), which it also sends as SNI.
 * Not verifying takes TAXI_TLS_NO_VERIFY, by name.
 *
 * The handshake starts when the connection is made (a client) or
 * accepted (a server).  Writes made before it completes wait for it; the
 * read callback gets nothing before it.  Its end is told to
 * taxi_stream_options_t.on_handshake (status 0, or the error); a failed
 * handshake closes that stream only, with TAXI_ETLS (a protocol failure:
 * no TLS, an old version, a malformed message), TAXI_EBADCERT (the peer's
 * certificate was refused: untrusted, expired, another name) or the
 * socket's error, and taxi_tls_error_text() says what the engine saw.  A
 * peer that ends the connection without its close_notify closes the
 * stream with TAXI_ETRUNCATED, not end of stream: the bytes read may have
 * been cut short.  A stream's counters (taxi_stream_counters) count
 * plaintext bytes.
 *
 * Threads.  A context may be used by any number of streams and threads at
 * once; the functions here may be called from any thread.  A context is
 * reference-counted: each stream and listener using it holds a reference,
 * so the creator may drop its own at once.
 *
 * Errors.  0 (or a count) on success, a negative TAXI_E* code on failure.
 */
#ifndef TAXI_TLS_H
#define TAXI_TLS_H

#include "platform.h"
#include "stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_tls_context taxi_tls_context_t; /* a TLS configuration */

/*
 * A server's SNI callback: the client asked for `name` (the server name
 * it sent; never NULL, never empty); return the context whose
 * certificate serves it, or NULL to keep the listener's.  Runs in a
 * dispatching thread during the handshake, possibly in several at once:
 * it must not block.  The returned context must stay alive until the
 * callback returns (the session takes what it needs); its own SNI
 * callback and options other than its certificate, key and ALPN list are
 * not used.
 */
typedef taxi_tls_context_t *(*taxi_tls_sni_fn)(const char *name, void *arg);

/* taxi_tls_options_t.flags */
/* A client: do not verify the server's certificate nor its name.  For
 * tests and for peers authenticated otherwise; never the default. */
#define TAXI_TLS_NO_VERIFY 0x1u
/* A client: do not keep sessions for resumption (see session_cache). */
#define TAXI_TLS_NO_RESUME 0x2u

/* Options of a context.  Initialise with taxi_tls_options_init(), then
 * set what differs.  Files are read at the create and not kept. */
typedef struct taxi_tls_options {
  size_t size; /* sizeof(taxi_tls_options_t) */
  /* A server: its certificate chain (PEM: its certificate first, then
   * the intermediates) and its private key (PEM).  Both required. */
  const char *cert_file;
  const char *key_file; /* see cert_file */
  /* A client: the authorities it trusts, a PEM file of certificates
   * and/or a directory prepared with `openssl rehash`; both NULL: the
   * system's default store. */
  const char *ca_file;
  const char *ca_dir; /* see ca_file */
  unsigned flags;     /* TAXI_TLS_* */
  /* ALPN protocols, comma-separated ("h2,http/1.1"), NULL: none.  A
   * client offers them in that order; a server picks the first of its own
   * list that the client offered (none in common: the handshake goes on
   * without ALPN).  Each name 1 to 255 bytes. */
  const char *alpn;
  /* A server: chooses a context per name asked for (NULL: none). */
  taxi_tls_sni_fn on_sni;
  void *sni_arg; /* passed to on_sni */
  /* A client: how many sessions it keeps for resumption, one per
   * host:port, the oldest replaced first (0: 64). */
  unsigned session_cache;
} taxi_tls_options_t;

/* taxi_tls_options_init - the defaults: nothing set, verification on,
 * resumption on.  Nothing for NULL. */
TAXI_EXTERN void taxi_tls_options_init(taxi_tls_options_t *o);

/*
 * taxi_tls_server_create - a server context: cert_file and key_file
 * (required), alpn, on_sni.  The new context has one reference, the
 * caller's.
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL out or o, no cert_file or
 * key_file, an unknown flag, a malformed alpn list: the detail,
 * taxi_error_detail(), names it), TAXI_ENOENT (a file that cannot be
 * read), TAXI_ETLS (a file the engine refuses, or a key that does not
 * match the certificate: the detail has the engine's reason),
 * TAXI_ENOTSUP (built without a TLS engine), TAXI_ENOMEM.
 * Threads: any.
 */
TAXI_EXTERN int taxi_tls_server_create(taxi_tls_context_t **out,
                                       const taxi_tls_options_t *o);

/*
 * taxi_tls_client_create - a client context: ca_file, ca_dir, flags,
 * alpn, session_cache.  It keeps the sessions of the servers it
 * connected to (one per host:port) and offers them again, so a second
 * connection to a server resumes (taxi_tls_info_t.resumed).
 * Returns 0 and sets *out, or as taxi_tls_server_create (TAXI_ETLS: a
 * trust store the engine refuses).  Threads: any.
 */
TAXI_EXTERN int taxi_tls_client_create(taxi_tls_context_t **out,
                                       const taxi_tls_options_t *o);

/* taxi_tls_context_ref / taxi_tls_context_unref - take or drop a
 * reference; the context is freed with its last one (the streams and
 * listeners using it hold theirs).  Returns 0 or TAXI_EINVAL (NULL).
 * Threads: any. */
TAXI_EXTERN int taxi_tls_context_ref(taxi_tls_context_t *c);
/* See taxi_tls_context_ref. */
TAXI_EXTERN int taxi_tls_context_unref(taxi_tls_context_t *c);

/* taxi_tls_context_is_server - 1 for a server context, 0 for a client
 * one, TAXI_EINVAL for NULL.  Threads: any. */
TAXI_EXTERN int taxi_tls_context_is_server(const taxi_tls_context_t *c);

/* taxi_tls_engine - the TLS engine built in ("OpenSSL 3.0.13 ..."), or
 * NULL when there is none (every create is then TAXI_ENOTSUP).  A static
 * string.  Threads: any. */
TAXI_EXTERN const char *taxi_tls_engine(void);

/* ---- streams --------------------------------------------------------------
 */

/* What a TLS stream negotiated (taxi_tls_info). */
typedef struct taxi_tls_info {
  size_t size;           /* sizeof(taxi_tls_info_t), set by the caller */
  int handshake_done;    /* 1 once the handshake completed */
  int resumed;           /* 1: a session was resumed (no full handshake) */
  int server;            /* 1: this end is the server */
  char version[16];      /* "TLSv1.3", "" before the handshake */
  char cipher[64];       /* the cipher suite's name, "" before */
  char alpn[256];        /* the protocol ALPN chose, "" for none */
  char server_name[256]; /* SNI: what the client sent (both ends), "" */
} taxi_tls_info_t;

/*
 * taxi_tls_info - what the TLS stream s negotiated, copied into *out (its
 * size field set by the caller; a smaller size copies less).
 * Returns 0, TAXI_EINVAL (NULL, a size too small to hold
 * handshake_done), TAXI_ENOENT (not a TLS stream), TAXI_EBADF (closed:
 * the engine's state is freed once the close callback has returned).
 * Threads: any; exact from the stream's callbacks.
 */
TAXI_EXTERN int taxi_tls_info(const taxi_stream_t *s, taxi_tls_info_t *out);

/*
 * taxi_tls_error_text - why the TLS stream s failed, in the engine's
 * words ("certificate verify failed: certificate has expired", "wrong
 * version number", "unexpected eof while reading"), or "" while it has
 * not failed (and for NULL, a plain stream, or a stream whose close
 * callback has returned).  The string belongs to the stream: read it in
 * the on_handshake or close callback.  Threads: the stream's callbacks.
 */
TAXI_EXTERN const char *taxi_tls_error_text(const taxi_stream_t *s);

/*
 * taxi_listener_set_tls - the context for the connections l accepts from
 * now on: a reloaded certificate and key (a new server context), or NULL
 * for plain streams.  Streams accepted before keep the context they
 * started with until they close.  The listener takes a reference to c
 * and drops the one it held.
 * Returns 0, TAXI_EINVAL (NULL l, a client context), TAXI_EBADF (l is
 * closing).  Threads: any.
 */
TAXI_EXTERN int taxi_listener_set_tls(taxi_listener_t *l,
                                      taxi_tls_context_t *c);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_TLS_H */
