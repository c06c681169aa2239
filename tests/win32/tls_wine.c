/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/win32/tls_wine.c - TLS streams of a Windows build (the SChannel
 * engine), run under wine by tests/win32/tls-wine.sh, which makes the
 * certificates with openssl on the Linux side and plays the non-taxi
 * peers (openssl s_server and s_client).  Modes:
 *
 *   tls_wine pairs DIR      taxi client against taxi server in this
 *                           process on each Windows dispatcher: echoes,
 *                           every byte checked, close_notify both ways
 *   tls_wine fail DIR       an untrusted CA, a wrong host name, an
 *                           expired certificate, a plain-text client
 *   tls_wine client PORT CA NAME WANT [DISPATCHER:BACKEND]
 *                           against `openssl s_server` on 127.0.0.1:PORT:
 *                           WANT page (-www), rev (-rev: 200 lines, each
 *                           back reversed) or the failure expected (see
 *                           client()); by default over proactor:iocp
 *   tls_wine server DIR     an echo server on 127.0.0.1 (prints
 *                           "listening on 127.0.0.1:PORT") for one
 *                           `openssl s_client`, which must end with
 *                           close_notify
 *
 * DIR holds ca.pem, ca2.pem, srv.pem/srv.key (localhost, 127.0.0.1),
 * expired.pem/expired.key.  Prints "ok: ..." / "FAIL: ..." lines and
 * exits 0 when all passed, 1 otherwise; waits are bounded.
 */
#include <taxi/taxi.h>
#include <taxi/tls.h>

#include <windows.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static char dir[512];

#define CHECK(cond, ...) \
  do {                   \
    if (cond) {          \
      printf("ok: ");    \
    } else {             \
      printf("FAIL: ");  \
      failures++;        \
    }                    \
    printf(__VA_ARGS__); \
    printf("\n");        \
  } while (0)

static const char *path(const char *name) {
  static char bufs[4][600];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, 600, "%s/%s", dir, name);
  return b;
}

/* Waits (bounded, max_ms) until *a >= n: 1 if it came. */
static int wait_count(atomic_int *a, int n, int max_ms) {
  for (int t = 0; atomic_load(a) < n; t++) {
    if (t >= max_ms) return 0;
    Sleep(1);
  }
  return 1;
}

static taxi_tls_context_t *server_ctx(const char *name) {
  char cert[64], key[64];
  snprintf(cert, sizeof cert, "%s.pem", name);
  snprintf(key, sizeof key, "%s.key", name);
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = path(cert);
  o.key_file = path(key);
  o.alpn = "taxi/1,http/1.1";
  taxi_tls_context_t *c = NULL;
  int rc = taxi_tls_server_create(&c, &o);
  if (rc < 0) printf("server context %s: %s\n", name, taxi_error_detail());
  return c;
}

static taxi_tls_context_t *client_ctx(const char *ca) {
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  char f[64];
  snprintf(f, sizeof f, "%s.pem", ca);
  o.ca_file = path(f);
  o.alpn = "http/1.1";
  taxi_tls_context_t *c = NULL;
  int rc = taxi_tls_client_create(&c, &o);
  if (rc < 0) printf("client context: %s\n", taxi_error_detail());
  return c;
}

/* ---- the io and its thread ------------------------------------------------
 */

typedef struct io {
  taxi_io_t *io;
  HANDLE thread;
} io_t;

static DWORD WINAPI run(void *arg) {
  taxi_io_run(((io_t *)arg)->io);
  return 0;
}

static int io_start(io_t *x, taxi_io_dispatcher_t d, const char *backend) {
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = d;
  o.backend = backend;
  o.threads = d == TAXI_IO_REACTOR ? 1 : 2;
  if (taxi_io_create(&x->io, &o) < 0) return -1;
  x->thread = CreateThread(NULL, 0, run, x, 0, NULL);
  if (!x->thread) {
    taxi_io_destroy(x->io);
    return -1;
  }
  return 0;
}

static void io_end(io_t *x) {
  taxi_io_stop(x->io);
  taxi_io_wait(x->io, 20000);
  WaitForSingleObject(x->thread, 20000);
  CloseHandle(x->thread);
  taxi_io_destroy(x->io);
}

/* ---- the echo server ------------------------------------------------------
 */

typedef struct srv {
  atomic_int accepted, hs_ok, hs_failed, eofs, closed, closed_ok;
  atomic_int last_hs;
  char why[256];
  int once; /* server mode: stop after one connection */
} srv_t;

static void srv_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  srv_t *v = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    atomic_fetch_add(&v->eofs, 1);
    taxi_stream_end(s); /* the echo's end: our close_notify */
    return;
  }
  if (taxi_stream_write(s, data, len, NULL, NULL) < 0) taxi_stream_close(s);
  /* server mode: a line echoed, our close_notify follows it. */
  if (v->once && memchr(data, '\n', len)) taxi_stream_end(s);
}

static void srv_closed(taxi_stream_t *s, int reason) {
  srv_t *v = taxi_stream_data(s);
  if (reason) snprintf(v->why, sizeof v->why, "%s", taxi_tls_error_text(s));
  if (reason == 0) atomic_fetch_add(&v->closed_ok, 1);
  atomic_fetch_add(&v->closed, 1);
}

static void srv_handshake(taxi_stream_t *s, int status) {
  srv_t *v = taxi_stream_data(s);
  if (status < 0) snprintf(v->why, sizeof v->why, "%s", taxi_tls_error_text(s));
  atomic_store(&v->last_hs, status);
  atomic_fetch_add(status == 0 ? &v->hs_ok : &v->hs_failed, 1);
}

static void srv_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  srv_t *v = arg;
  atomic_fetch_add(&v->accepted, 1);
  taxi_stream_set_data(s, v);
  taxi_stream_on_close(s, srv_closed);
  taxi_stream_read_start(s, srv_read);
}

static int listen_tls(io_t *x, taxi_tls_context_t *c, srv_t *v) {
  memset(v, 0, sizeof *v);
  atomic_init(&v->last_hs, 1);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_PAUSE_READING;
  so.tls = c;
  so.on_handshake = srv_handshake;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  taxi_listener_t *l;
  if (taxi_listener_create(&l, x->io, "127.0.0.1:0", &lo, srv_accept, v) < 0)
    return -1;
  taxi_addr_t a;
  if (taxi_listener_address(l, &a) < 0) return -1;
  return (int)taxi_addr_port(&a);
}

/* ---- the echo client ------------------------------------------------------
 */

typedef struct cli {
  taxi_stream_t *s;
  unsigned seed, rnd;
  size_t total, sent, got;
  int bad, hs, reason;
  char why[256];
  taxi_tls_info_t info;
  atomic_int done;
  /* A raw reply (client mode): what came back. */
  char *reply;
  size_t rlen, lines;
  const char *request;
  size_t request_lines; /* s_server -rev: the lines to come back */
} cli_t;

static unsigned char byte_at(unsigned seed, size_t i) {
  unsigned x = seed * 2654435761u + (unsigned)i * 40503u;
  return (unsigned char)(x ^ (x >> 13) ^ (unsigned)(i >> 8));
}

static void cli_send(taxi_stream_t *s) {
  cli_t *c = taxi_stream_data(s);
  unsigned char seg[4096];
  while (c->sent < c->total) {
    c->rnd = c->rnd * 1103515245u + 12345u;
    size_t n = 1 + (c->rnd >> 8) % sizeof seg;
    if (n > c->total - c->sent) n = c->total - c->sent;
    for (size_t i = 0; i < n; i++)
      seg[i] = c->request ? (unsigned char)c->request[c->sent + i]
                          : byte_at(c->seed, c->sent + i);
    int rc = taxi_stream_write(s, seg, n, NULL, NULL);
    if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) return; /* on_drain */
    if (rc < 0) {
      taxi_stream_close(s);
      return;
    }
    c->sent += n;
  }
  /* Odd streams send their close_notify as soon as all is queued: the
   * echo still comes back. */
  if (c->seed & 1 && !c->request) taxi_stream_shutdown(s);
}

static void cli_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  cli_t *c = taxi_stream_data(s);
  if (status == TAXI_EEOF) { /* the server's close_notify */
    taxi_stream_close(s);
    return;
  }
  if (c->request) {
    char *r = realloc(c->reply, c->rlen + len + 1);
    if (!r) return;
    c->reply = r;
    memcpy(r + c->rlen, data, len);
    c->rlen += len;
    r[c->rlen] = '\0';
    /* Every line back (the s_server -rev case): our close_notify. */
    for (size_t i = 0; i < len; i++)
      if (((const char *)data)[i] == '\n') c->lines++;
    if (c->request_lines && c->lines == c->request_lines)
      taxi_stream_shutdown(s);
    return;
  }
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    if (p[i] != byte_at(c->seed, c->got + i)) c->bad = 1;
  c->got += len;
  if (c->got == c->total && !(c->seed & 1)) taxi_stream_shutdown(s);
}

static void cli_closed(taxi_stream_t *s, int reason) {
  cli_t *c = taxi_stream_data(s);
  c->reason = reason;
  snprintf(c->why, sizeof c->why, "%s", taxi_tls_error_text(s));
  atomic_store(&c->done, 1);
}

static void cli_handshake(taxi_stream_t *s, int status) {
  cli_t *c = taxi_stream_data(s);
  c->hs = status;
  c->info.size = sizeof c->info;
  if (status == 0) taxi_tls_info(s, &c->info);
}

static void cli_connected(taxi_stream_t *s, int status, void *arg) {
  cli_t *c = arg;
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, cli_closed);
  if (status < 0) return;
  taxi_stream_read_start(s, cli_read);
  taxi_stream_on_drain(s, cli_send);
  cli_send(s); /* queued until the handshake is done */
}

/* The request of client mode, sent instead of an echo. */
static const char *request;

static int cli_start(cli_t *c, io_t *x, int port, taxi_tls_context_t *ctx,
                     const char *name, size_t total, unsigned seed) {
  memset(c, 0, sizeof *c);
  c->request = request;
  if (request) {
    total = strlen(request);
    for (const char *p = request; *p; p++) c->request_lines += *p == '\n';
    if (strchr(request, '\r')) c->request_lines = 0; /* not -rev's */
  }
  c->seed = seed;
  c->rnd = seed + 1;
  c->total = total;
  c->hs = 1;
  c->reason = 1;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.tls = ctx;
  o.tls_server_name = name;
  o.on_handshake = ctx ? cli_handshake : NULL;
  o.high_watermark = 65536;
  return taxi_stream_connect(&c->s, x->io, addr, &o, cli_connected, c);
}

static int cli_wait(cli_t *c, int n, int max_ms) {
  for (int i = 0; i < n; i++)
    if (!wait_count(&c[i].done, 1, max_ms)) return 0;
  return 1;
}

/* ---- whether this SChannel serves -----------------------------------------
 */

/* Wine's SChannel (8.0, Debian 12's) has no AcceptSecurityContext: it
 * answers SEC_E_UNSUPPORTED_FUNCTION (0x80090302), so no taxi server
 * runs there.  1 if a server handshake got that answer. */
static int no_server(const srv_t *v) {
  return atomic_load(&v->hs_failed) > 0 && strstr(v->why, "0x80090302");
}

#define NO_SERVER                                                   \
  "SKIP: this SChannel has no server side (AcceptSecurityContext: " \
  "SEC_E_UNSUPPORTED_FUNCTION, as wine 8's): "

/* ---- pairs ----------------------------------------------------------------
 */

static int skipped;

#define STREAMS 20

static void pair(taxi_io_dispatcher_t d, const char *backend) {
  io_t x;
  const char *dn = taxi_io_dispatcher_name(d);
  if (io_start(&x, d, backend) < 0) {
    printf("skip: %s/%s: not in this build\n", dn, backend);
    return;
  }
  taxi_tls_context_t *sc = server_ctx("srv"), *cc = client_ctx("ca");
  srv_t v;
  int port = sc && cc ? listen_tls(&x, sc, &v) : -1;
  taxi_tls_context_unref(sc); /* the listener holds its own */
  static cli_t c[STREAMS];
  size_t bytes = 0;
  int good = 0;
  for (int i = 0; port > 0 && i < STREAMS; i++) {
    size_t len = 1 + (size_t)(i * 7919) % 60000;
    bytes += len;
    /* By IP address (its SAN) and by name, in turns. */
    if (cli_start(&c[i], &x, port, cc, i % 2 ? "localhost" : NULL, len,
                  (unsigned)i) < 0)
      printf("  connect %d failed\n", i);
  }
  if (port > 0 && cli_wait(c, STREAMS, 60000)) {
    for (int i = 0; i < STREAMS; i++) {
      int ok = c[i].reason == 0 && c[i].hs == 0 && !c[i].bad &&
               c[i].got == c[i].total;
      if (!ok)
        printf("  stream %d: reason %s, handshake %d, %zu of %zu, bad %d: %s\n",
               i, taxi_error_name(c[i].reason), c[i].hs, c[i].got, c[i].total,
               c[i].bad, c[i].why);
      good += ok;
    }
  }
  wait_count(&v.closed, STREAMS, 20000);
  if (no_server(&v)) {
    printf(NO_SERVER "%s/%s\n", dn, backend);
    skipped = 1;
    io_end(&x);
    taxi_tls_context_unref(cc);
    return;
  }
  CHECK(good == STREAMS && atomic_load(&v.eofs) == STREAMS &&
            atomic_load(&v.closed_ok) == STREAMS,
        "%s/%s: %d of %d TLS echoes (%zu bytes) checked, %d close_notify "
        "seen by the server, %d clean closes; %s, %s, ALPN \"%s\"",
        dn, backend, good, STREAMS, bytes, atomic_load(&v.eofs),
        atomic_load(&v.closed_ok), c[0].info.version, c[0].info.cipher,
        c[0].info.alpn);
  io_end(&x);
  taxi_tls_context_unref(cc);
}

static int pairs(void) {
  pair(TAXI_IO_REACTOR, "wsapoll");
  if (!skipped) {
    pair(TAXI_IO_REACTOR, "select");
    pair(TAXI_IO_LF, "wsapoll");
    pair(TAXI_IO_HSHA, "select");
    pair(TAXI_IO_PROACTOR, "iocp");
    pair(TAXI_IO_PROACTOR, "emulated");
  }
  return failures ? 1 : skipped ? 77 : 0;
}

/* ---- failures -------------------------------------------------------------
 */

/* A client of ca_name to a server of srv_name, as name: its handshake
 * must fail with want, its text containing text. */
static void refused(io_t *x, const char *what, const char *srv_name,
                    const char *ca_name, const char *name, int want,
                    const char *text) {
  taxi_tls_context_t *sc = server_ctx(srv_name), *cc = client_ctx(ca_name);
  srv_t v;
  int port = sc && cc ? listen_tls(x, sc, &v) : -1;
  taxi_tls_context_unref(sc);
  static cli_t c;
  int done = port > 0 && cli_start(&c, x, port, cc, name, 10, 0) == 0 &&
             cli_wait(&c, 1, 20000);
  wait_count(&v.closed, 1, 20000);
  taxi_tls_context_unref(cc);
  if (no_server(&v)) {
    printf(NO_SERVER "%s (tls-wine.sh checks it against openssl s_server)\n",
           what);
    skipped = 1;
    return;
  }
  CHECK(done && c.hs == want && c.reason == want && strstr(c.why, text),
        "%s: the client's handshake %s (want %s), \"%s\"", what,
        taxi_error_name(c.hs), taxi_error_name(want), c.why);
}

static int fail(void) {
  io_t x;
  if (io_start(&x, TAXI_IO_LF, "wsapoll") < 0) {
    printf("FAIL: no L/F over WSAPoll\n");
    return 1;
  }
  refused(&x, "untrusted CA", "srv", "ca2", NULL, TAXI_EBADCERT,
          "unable to get local issuer certificate");
  refused(&x, "wrong host name", "srv", "ca", "other.example", TAXI_EBADCERT,
          "hostname mismatch");
  refused(&x, "expired certificate", "expired", "ca", "localhost",
          TAXI_EBADCERT, "expired");
  /* A plain-text client: the server's handshake fails. */
  taxi_tls_context_t *sc = server_ctx("srv");
  srv_t v;
  int port = sc ? listen_tls(&x, sc, &v) : -1;
  taxi_tls_context_unref(sc);
  static cli_t c;
  int started = port > 0 && cli_start(&c, &x, port, NULL, NULL, 3000, 2) == 0;
  int failed = started && wait_count(&v.hs_failed, 1, 20000);
  cli_wait(&c, 1, 20000);
  if (no_server(&v)) {
    printf(NO_SERVER "a plain-text client\n");
    skipped = 1;
  } else {
    CHECK(failed && atomic_load(&v.last_hs) == TAXI_ETLS,
          "a plain-text client: the server's handshake %s, \"%s\"",
          taxi_error_name(atomic_load(&v.last_hs)), v.why);
  }
  /* A server key that is not the certificate's, an EC key. */
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = path("srv.pem");
  o.key_file = path("ca.key");
  taxi_tls_context_t *bad = NULL;
  int rc = taxi_tls_server_create(&bad, &o);
  CHECK(rc == TAXI_ETLS && strstr(taxi_error_detail(), "not the certificate"),
        "a key that is not the certificate's: %s, \"%s\"", taxi_error_name(rc),
        taxi_error_detail());
  /* An EC key: a CNG key where the system can import it (Windows), else
   * refused with the reason (wine 8's CNG cannot). */
  o.cert_file = path("ecsrv.pem");
  o.key_file = path("ecsrv.key");
  rc = taxi_tls_server_create(&bad, &o);
  CHECK(rc == 0 || (rc == TAXI_ETLS && strstr(taxi_error_detail(), "EC key")),
        "an EC key: %s, \"%s\"", taxi_error_name(rc),
        rc == 0 ? "" : taxi_error_detail());
  if (rc == 0) taxi_tls_context_unref(bad);
  o.cert_file = path("srv.pem");
  o.key_file = path("missing.key");
  rc = taxi_tls_server_create(&bad, &o);
  CHECK(rc == TAXI_ENOENT, "a missing key file: %s, \"%s\"",
        taxi_error_name(rc), taxi_error_detail());
  io_end(&x);
  return failures ? 1 : skipped ? 77 : 0;
}

/* ---- foreign peers --------------------------------------------------------
 */

/* Against openssl on the Linux side.  want: "page" (s_server -www: the
 * page read to the server's close_notify), "rev" (s_server -rev: a line
 * sent, its reverse back, then our close_notify and the server's), or an
 * error name and the text it must carry ("TAXI_EBADCERT:expired"). */
/* "lf:wsapoll" into a dispatcher and a backend: 0 or -1. */
static int parse_pair(const char *pair, taxi_io_dispatcher_t *d, char *backend,
                      size_t cap) {
  static const struct {
    const char *name;
    taxi_io_dispatcher_t d;
  } names[] = {{"reactor", TAXI_IO_REACTOR},
               {"lf", TAXI_IO_LF},
               {"hsha", TAXI_IO_HSHA},
               {"proactor", TAXI_IO_PROACTOR}};
  const char *colon = strchr(pair, ':');
  if (!colon) return -1;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i].name) == (size_t)(colon - pair) &&
        strncmp(pair, names[i].name, (size_t)(colon - pair)) == 0) {
      *d = names[i].d;
      snprintf(backend, cap, "%s", colon + 1);
      return 0;
    }
  return -1;
}

#define REV_LINES 200

/* REV_LINES lines of 1 to 3000 letters, and what s_server -rev answers:
 * each reversed.  Both allocated. */
static void rev_lines(char **req, char **want) {
  size_t cap = REV_LINES * 3001 + 1, n = 0;
  *req = malloc(cap);
  *want = malloc(cap);
  if (!*req || !*want) exit(1);
  unsigned rnd = 77;
  for (int l = 0; l < REV_LINES; l++) {
    rnd = rnd * 1103515245u + 12345u;
    size_t len = 1 + (rnd >> 8) % 3000;
    for (size_t i = 0; i < len; i++) {
      rnd = rnd * 1103515245u + 12345u;
      (*req)[n + i] = (char)('a' + (rnd >> 16) % 26);
      (*want)[n + len - 1 - i] = (*req)[n + i];
    }
    (*req)[n + len] = (*want)[n + len] = '\n';
    n += len + 1;
  }
  (*req)[n] = (*want)[n] = '\0';
}

static int client(int port, const char *ca, const char *name, const char *want,
                  const char *pair) {
  io_t x;
  taxi_io_dispatcher_t d = TAXI_IO_PROACTOR;
  char backend[32] = "iocp";
  if (pair && parse_pair(pair, &d, backend, sizeof backend) < 0) {
    printf("FAIL: %s: not DISPATCHER:BACKEND\n", pair);
    return 1;
  }
  if (io_start(&x, d, backend) < 0) {
    printf("SKIP: %s/%s: not in this build\n", taxi_io_dispatcher_name(d),
           backend);
    return 77;
  }
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.ca_file = ca;
  o.alpn = "taxi/1,http/1.1"; /* s_server -www is given -alpn http/1.1 */
  taxi_tls_context_t *cc = NULL;
  if (taxi_tls_client_create(&cc, &o) < 0) {
    printf("FAIL: client context: %s\n", taxi_error_detail());
    return 1;
  }
  static cli_t c;
  int rev = strcmp(want, "rev") == 0;
  char *lines = NULL, *reversed = NULL;
  if (rev) rev_lines(&lines, &reversed);
  request = rev ? lines : "GET / HTTP/1.0\r\n\r\n";
  int done =
      cli_start(&c, &x, port, cc, name, 0, 0) == 0 && cli_wait(&c, 1, 30000);
  if (strcmp(want, "page") == 0) {
    CHECK(done && c.hs == 0 && c.reason == 0 && c.reply &&
              strstr(c.reply, "200 ok") != NULL &&
              strcmp(c.info.alpn, "http/1.1") == 0,
          "openssl s_server -www: %s %s, ALPN \"%s\", %zu bytes of page, "
          "then its close_notify (closed %s \"%s\")",
          c.info.version, c.info.cipher, c.info.alpn, c.rlen,
          taxi_error_name(c.reason), c.why);
  } else if (rev) {
    CHECK(done && c.hs == 0 && c.reason == 0 && c.reply &&
              strcmp(c.reply, reversed) == 0,
          "openssl s_server -rev on %s/%s: %d lines (%zu bytes) each came "
          "back reversed, every byte checked; close_notify both ways "
          "(closed %s \"%s\")",
          taxi_io_dispatcher_name(d), backend, REV_LINES, strlen(lines),
          taxi_error_name(c.reason), c.why);
  } else {
    char code[64];
    const char *colon = strchr(want, ':');
    size_t n = colon ? (size_t)(colon - want) : strlen(want);
    snprintf(code, sizeof code, "%.*s", (int)n, want);
    CHECK(done && strcmp(taxi_error_name(c.hs), code) == 0 &&
              strcmp(taxi_error_name(c.reason), code) == 0 &&
              (!colon || strstr(c.why, colon + 1)),
          "openssl s_server, as %s: the handshake %s (want %s), \"%s\"", name,
          taxi_error_name(c.hs), want, c.why);
  }
  io_end(&x);
  taxi_tls_context_unref(cc);
  free(c.reply);
  free(lines);
  free(reversed);
  return failures ? 1 : 0;
}

static int server(void) {
  io_t x;
  if (io_start(&x, TAXI_IO_PROACTOR, "iocp") < 0 &&
      io_start(&x, TAXI_IO_REACTOR, "wsapoll") < 0)
    return 1;
  taxi_tls_context_t *sc = server_ctx("srv");
  srv_t v;
  int port = sc ? listen_tls(&x, sc, &v) : -1;
  v.once = 1;
  taxi_tls_context_unref(sc);
  if (port < 0) return 1;
  printf("listening on 127.0.0.1:%d\n", port);
  fflush(stdout);
  int closed = wait_count(&v.closed, 1, 60000);
  if (no_server(&v)) {
    printf(NO_SERVER "openssl s_client\n");
    io_end(&x);
    return 77;
  }
  CHECK(closed && atomic_load(&v.hs_ok) == 1 && atomic_load(&v.eofs) == 1 &&
            atomic_load(&v.closed_ok) == 1,
        "openssl s_client: handshake %d, close_notify seen %d, clean close "
        "%d \"%s\"",
        atomic_load(&v.hs_ok), atomic_load(&v.eofs), atomic_load(&v.closed_ok),
        v.why);
  io_end(&x);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *engine = taxi_tls_engine();
  printf("TLS engine: %s\n", engine ? engine : "none");
  if (!engine) return 77;
  if (argc == 3 && strcmp(argv[1], "pairs") == 0) {
    snprintf(dir, sizeof dir, "%s", argv[2]);
    return pairs();
  }
  if (argc == 3 && strcmp(argv[1], "fail") == 0) {
    snprintf(dir, sizeof dir, "%s", argv[2]);
    return fail();
  }
  if ((argc == 6 || argc == 7) && strcmp(argv[1], "client") == 0)
    return client(atoi(argv[2]), argv[3], argv[4], argv[5],
                  argc == 7 ? argv[6] : NULL);
  if (argc == 3 && strcmp(argv[1], "server") == 0) {
    snprintf(dir, sizeof dir, "%s", argv[2]);
    return server();
  }
  fprintf(
      stderr,
      "usage: tls_wine pairs DIR | fail DIR | client PORT CA NAME WANT [D:B] | "
      "server DIR\n");
  return 2;
}
