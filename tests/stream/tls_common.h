/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_common.h - what the TLS stream tests share: the
 * certificates made at start (by the openssl command, in a temporary
 * directory, never kept), contexts over them, a TLS client stream that
 * echoes random segments through a server and checks every byte, and a
 * record of how a server's streams ended.
 */
#ifndef TAXI_TESTS_STREAM_TLS_COMMON_H
#define TAXI_TESTS_STREAM_TLS_COMMON_H

#include "suites.h"

#include <pthread.h>

/* The path of file `name` in the certificates' directory (a static
 * buffer of 8 rotating). */
const char *tls_path(const char *name);
/* Make the certificates: ca (ca.pem, ca.key), srv (localhost and
 * 127.0.0.1, by ca), expired (the same names, expired), other (for
 * other.example, by ca), alt (alt.test, by ca), self (localhost,
 * self-signed), ca2 and srv2 (localhost by ca2).  0 or -1. */
int tls_make_certs(void);
void tls_remove_certs(void);

/* A server context of cert NAME.pem / NAME.key (alpn may be NULL). */
taxi_tls_context_t *tls_server(const char *name, const char *alpn);
/* A client context trusting ca_name.pem (NULL: verification off). */
taxi_tls_context_t *tls_client(const char *ca_name, const char *alpn);

/* How a server's streams ended. */
typedef struct tls_srv {
  atomic_int accepted, hs_ok, hs_failed, closed, closed_ok, eofs;
  atomic_int last_hs, last_close;
  pthread_mutex_t lock;
  char why[256]; /* the last failure's text */
  char sni[256]; /* the last server name seen */
} tls_srv_t;
void tls_srv_init(tls_srv_t *v);
/* An echo server over TLS streams: on_handshake and close recorded in
 * the tls_srv_t that is the listener's arg. */
void tls_srv_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg);
/* The handshake callback the listener's stream options must name. */
void tls_srv_handshake(taxi_stream_t *s, int status);
/* A TLS listener of c on 127.0.0.1:0 echoing into v: its port, or -1. */
int tls_listen(st_io_t *io, taxi_tls_context_t *c, tls_srv_t *v,
               taxi_listener_t **out);

/* A client echo conversation. */
typedef struct tls_cli {
  taxi_stream_t *s;
  unsigned seed;
  size_t total, sent, got, max_seg;
  unsigned rnd;
  int bad;              /* a byte differed */
  int paused;           /* not reading until tls_cli_read */
  int hs_status;        /* what on_handshake said (1: not told) */
  int reason;           /* the close reason */
  char why[256];        /* taxi_tls_error_text at the close */
  taxi_tls_info_t info; /* at the handshake */
  atomic_int done;
} tls_cli_t;
/* Start c's echo of `total` bytes (segments of 1..max_seg) to
 * 127.0.0.1:port with context ctx (name: tls_server_name, NULL: the
 * address's).  max_seg 0: send nothing, read `total` bytes (the stream
 * numbered seed), then the end.  0 or the connect's error. */
int tls_cli_start(tls_cli_t *c, st_io_t *io, int port, taxi_tls_context_t *ctx,
                  const char *name, size_t total, size_t max_seg,
                  unsigned seed);
/* Connect as tls_cli_start, without reading until tls_cli_read. */
int tls_cli_start_paused(tls_cli_t *c, st_io_t *io, int port,
                         taxi_tls_context_t *ctx, size_t total, unsigned seed);
int tls_cli_read(tls_cli_t *c);
/* Wait (bounded) for n clients to be done: 1 if they were. */
int tls_cli_wait(tls_cli_t *c, size_t n, int max_ms);
/* Wait (bounded) until *a >= n: 1 if so. */
int tls_wait_count(atomic_int *a, int n, int max_ms);

extern CU_TestInfo tls_tests_pair[];
extern CU_TestInfo tls_tests_misc[];
extern CU_TestInfo tls_tests_peers[];

#endif /* TAXI_TESTS_STREAM_TLS_COMMON_H */
