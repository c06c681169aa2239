/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_main.c - the TLS stream tests' program:
 *
 *   test_tls [FILTER]
 *
 * Makes the certificates with the openssl command in a temporary
 * directory (removed at the end), then runs suite "tls-pair[D:B]" (taxi
 * against taxi: echoes, files, backpressure, close_notify) over every
 * dispatcher x backend pair that works here, as tests/stream/main.c
 * enumerates them, and the suites of failures and peers once.  Built
 * without a TLS engine, it checks that contexts are TAXI_ENOTSUP and
 * skips the rest; without the openssl command it skips.
 */
#define _GNU_SOURCE 1

#include "config.h"

#include "tls_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[128];

const char *tls_path(const char *name) {
  static char bufs[8][256];
  static atomic_uint next;
  char *b = bufs[atomic_fetch_add(&next, 1) % 8];
  snprintf(b, 256, "%s/%s", dir, name);
  return b;
}

/* One openssl command in dir, its output dropped: 0 or -1. */
static int sh(const char *cmd) {
  char line[2048];
  snprintf(line, sizeof line, "cd '%s' && %s >/dev/null 2>&1", dir, cmd);
  int rc = system(line);
  if (rc != 0) printf("certificates: failed: %s\n", cmd);
  return rc == 0 ? 0 : -1;
}

#define KEY "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"

/* A key and a certificate NAME for cn with the SANs, signed by ca. */
static int leaf(const char *name, const char *cn, const char *san,
                const char *ca, const char *days) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "printf 'subjectAltName=%s\\n' > %s.cnf && "
           "openssl req -new " KEY
           " -keyout %s.key -out %s.csr -subj /CN=%s && "
           "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key "
           "-CAcreateserial -out %s.pem -days %s -extfile %s.cnf",
           san, name, name, name, cn, name, ca, ca, name, days, name);
  return sh(cmd);
}

/* The process that made the directory removes it however it exits (the
 * runner's --list exits inside taxi_test_run); not the suites' children. */
static pid_t maker;
static void remove_at_exit(void) {
  if (getpid() == maker) tls_remove_certs();
}

int tls_make_certs(void) {
  snprintf(dir, sizeof dir, "/tmp/taxi-tls-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  maker = getpid();
  atexit(remove_at_exit);
  if (sh("openssl req -x509 " KEY
         " -keyout ca.key -out ca.pem -days 2 -subj /CN=taxi-test-ca") < 0 ||
      sh("openssl req -x509 " KEY
         " -keyout ca2.key -out ca2.pem -days 2 -subj /CN=taxi-test-ca2") < 0 ||
      leaf("srv", "localhost", "DNS:localhost,IP:127.0.0.1", "ca", "2") < 0 ||
      leaf("srv2", "localhost", "DNS:localhost,IP:127.0.0.1", "ca2", "2") < 0 ||
      leaf("expired", "localhost", "DNS:localhost,IP:127.0.0.1", "ca", "-1") <
          0 ||
      leaf("other", "other.example", "DNS:other.example", "ca", "2") < 0 ||
      leaf("alt", "alt.test", "DNS:alt.test", "ca", "2") < 0 ||
      sh("openssl req -x509 " KEY " -keyout self.key -out self.pem -days 2 "
         "-subj /CN=localhost -addext "
         "subjectAltName=DNS:localhost,IP:127.0.0.1") < 0)
    return -1;
  return 0;
}

void tls_remove_certs(void) {
  if (!dir[0]) return;
  char line[256];
  snprintf(line, sizeof line, "rm -rf '%s'", dir);
  if (system(line) != 0) printf("could not remove %s\n", dir);
  dir[0] = '\0';
}

taxi_tls_context_t *tls_server(const char *name, const char *alpn) {
  char cert[64], key[64];
  snprintf(cert, sizeof cert, "%s.pem", name);
  snprintf(key, sizeof key, "%s.key", name);
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = tls_path(cert);
  o.key_file = tls_path(key);
  o.alpn = alpn;
  taxi_tls_context_t *c = NULL;
  int rc = taxi_tls_server_create(&c, &o);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) printf("server context %s: %s\n", name, taxi_error_detail());
  return rc < 0 ? NULL : c;
}

taxi_tls_context_t *tls_client(const char *ca_name, const char *alpn) {
  char ca[64];
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  if (ca_name) {
    snprintf(ca, sizeof ca, "%s.pem", ca_name);
    o.ca_file = tls_path(ca);
  } else {
    o.flags = TAXI_TLS_NO_VERIFY;
  }
  o.alpn = alpn;
  taxi_tls_context_t *c = NULL;
  int rc = taxi_tls_client_create(&c, &o);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) printf("client context: %s\n", taxi_error_detail());
  return rc < 0 ? NULL : c;
}

/* ---- the server ---------------------------------------------------------- */

void tls_srv_init(tls_srv_t *v) {
  memset(v, 0, sizeof *v);
  atomic_init(&v->last_hs, 1);
  atomic_init(&v->last_close, 1);
  pthread_mutex_init(&v->lock, NULL);
}

static void srv_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  tls_srv_t *v = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    atomic_fetch_add(&v->eofs, 1);
    taxi_stream_end(s);
    return;
  }
  if (taxi_stream_write(s, data, len, NULL, NULL) < 0) taxi_stream_close(s);
}

static void srv_closed(taxi_stream_t *s, int reason) {
  tls_srv_t *v = taxi_stream_data(s);
  pthread_mutex_lock(&v->lock);
  if (reason) snprintf(v->why, sizeof v->why, "%s", taxi_tls_error_text(s));
  pthread_mutex_unlock(&v->lock);
  atomic_store(&v->last_close, reason);
  if (reason == 0) atomic_fetch_add(&v->closed_ok, 1);
  atomic_fetch_add(&v->closed, 1);
}

void tls_srv_handshake(taxi_stream_t *s, int status) {
  tls_srv_t *v = taxi_stream_data(s);
  taxi_tls_info_t info = {.size = sizeof info};
  if (status == 0 && taxi_tls_info(s, &info) == 0 && info.server_name[0]) {
    pthread_mutex_lock(&v->lock);
    snprintf(v->sni, sizeof v->sni, "%s", info.server_name);
    pthread_mutex_unlock(&v->lock);
  }
  atomic_store(&v->last_hs, status);
  atomic_fetch_add(status == 0 ? &v->hs_ok : &v->hs_failed, 1);
}

void tls_srv_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  tls_srv_t *v = arg;
  atomic_fetch_add(&v->accepted, 1);
  taxi_stream_set_data(s, v);
  taxi_stream_on_close(s, srv_closed);
  taxi_stream_read_start(s, srv_read);
}

int tls_listen(st_io_t *io, taxi_tls_context_t *c, tls_srv_t *v,
               taxi_listener_t **out) {
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_PAUSE_READING;
  so.tls = c;
  so.on_handshake = tls_srv_handshake;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  lo.backlog = 1024;
  return st_listen(io, &lo, tls_srv_accept, v, out);
}

/* ---- the client ---------------------------------------------------------- */

static void cli_send(taxi_stream_t *s) {
  tls_cli_t *c = taxi_stream_data(s);
  unsigned char seg[4096];
  while (c->max_seg && c->sent < c->total) {
    c->rnd = c->rnd * 1103515245u + 12345u;
    size_t n = 1 + (c->rnd >> 8) % c->max_seg;
    if (n > c->total - c->sent) n = c->total - c->sent;
    if (n > sizeof seg) n = sizeof seg;
    for (size_t i = 0; i < n; i++) seg[i] = st_byte(c->seed, c->sent + i);
    int rc = taxi_stream_write(s, seg, n, NULL, NULL);
    if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) return; /* on_drain */
    if (rc < 0) {
      taxi_stream_close(s);
      return;
    }
    c->sent += n;
  }
  /* Odd streams half-close as soon as all is queued: the echo still
   * comes back after their close_notify. */
  if (c->max_seg && c->sent == c->total && (c->seed & 1))
    taxi_stream_shutdown(s);
}

static void cli_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  tls_cli_t *c = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    taxi_stream_close(s);
    return;
  }
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    if (p[i] != st_byte(c->seed, c->got + i)) c->bad = 1;
  c->got += len;
  /* All echoed: our close_notify; the server's comes back (EEOF). */
  if (c->max_seg && c->got == c->total && !(c->seed & 1))
    taxi_stream_shutdown(s);
}

static void cli_closed(taxi_stream_t *s, int reason) {
  tls_cli_t *c = taxi_stream_data(s);
  c->reason = reason;
  snprintf(c->why, sizeof c->why, "%s", taxi_tls_error_text(s));
  atomic_store(&c->done, 1);
}

static void cli_handshake(taxi_stream_t *s, int status) {
  tls_cli_t *c = taxi_stream_data(s);
  c->hs_status = status;
  c->info.size = sizeof c->info;
  if (status == 0) CU_ASSERT_EQUAL(taxi_tls_info(s, &c->info), 0);
}

static void cli_connected(taxi_stream_t *s, int status, void *arg) {
  tls_cli_t *c = arg;
  taxi_stream_on_close(s, cli_closed);
  if (status < 0) return;
  taxi_stream_on_drain(s, cli_send);
  if (!c->paused) taxi_stream_read_start(s, cli_read);
  cli_send(s); /* queued until the handshake is done */
}

static int cli_start(tls_cli_t *c, st_io_t *io, int port,
                     taxi_tls_context_t *ctx, const char *name, size_t total,
                     size_t max_seg, unsigned seed, int paused) {
  memset(c, 0, sizeof *c);
  c->paused = paused;
  c->seed = seed;
  c->rnd = seed * 2654435761u + 7;
  c->total = total;
  c->max_seg = max_seg;
  c->hs_status = 1;
  c->reason = 1;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.tls = ctx;
  o.tls_server_name = name;
  o.on_handshake = cli_handshake;
  o.high_watermark = 65536;
  return taxi_stream_connect(&c->s, io->io, addr, &o, cli_connected, c);
}

int tls_cli_start(tls_cli_t *c, st_io_t *io, int port, taxi_tls_context_t *ctx,
                  const char *name, size_t total, size_t max_seg,
                  unsigned seed) {
  return cli_start(c, io, port, ctx, name, total, max_seg, seed, 0);
}

int tls_cli_start_paused(tls_cli_t *c, st_io_t *io, int port,
                         taxi_tls_context_t *ctx, size_t total, unsigned seed) {
  return cli_start(c, io, port, ctx, NULL, total, 0, seed, 1);
}

int tls_cli_read(tls_cli_t *c) {
  return taxi_stream_read_start(c->s, cli_read);
}

int tls_cli_wait(tls_cli_t *c, size_t n, int max_ms) {
  taxi_time_t start = taxi_now();
  for (size_t i = 0; i < n; i++)
    while (!atomic_load(&c[i].done)) {
      if (util_elapsed_ms(start) > max_ms) return 0;
      util_sleep_ms(1);
    }
  return 1;
}

int tls_wait_count(atomic_int *a, int n, int max_ms) {
  taxi_time_t start = taxi_now();
  while (atomic_load(a) < n) {
    if (util_elapsed_ms(start) > max_ms) return 0;
    util_sleep_ms(1);
  }
  return 1;
}

/* ---- without an engine --------------------------------------------------- */

static void test_no_engine(void) {
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = "x.pem";
  o.key_file = "x.key";
  taxi_tls_context_t *c = NULL;
  CU_ASSERT_PTR_NULL(taxi_tls_engine());
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_ENOTSUP);
  CU_ASSERT_EQUAL(taxi_tls_client_create(&c, &o), TAXI_ENOTSUP);
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT(strstr(taxi_error_detail(), "without a TLS engine") != NULL);
}

static CU_TestInfo no_engine_tests[] = {
    {"no engine: TAXI_ENOTSUP", test_no_engine}, CU_TEST_INFO_NULL};

/* ---- the program --------------------------------------------------------- */

#define MAX_SUITES 64

static taxi_test_suite_t suites[MAX_SUITES];
static const taxi_test_suite_t *list[MAX_SUITES];
static char names[MAX_SUITES][96];
static size_t nsuites;

static int pair_works(taxi_io_dispatcher_t d, const char *backend) {
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = d;
  o.backend = backend;
  taxi_io_t *io;
  if (taxi_io_create(&io, &o) < 0) return 0;
  taxi_io_destroy(io);
  return 1;
}

static void add(const char *prefix, taxi_io_dispatcher_t d, const char *b,
                CU_TestInfo *tests) {
  if (nsuites == MAX_SUITES) return;
  snprintf(names[nsuites], sizeof names[nsuites], "%s[%s:%s]", prefix,
           taxi_io_dispatcher_name(d), b);
  suites[nsuites].name = names[nsuites];
  suites[nsuites].tests = tests;
  suites[nsuites].timeout_s = 300;
  list[nsuites] = &suites[nsuites];
  nsuites++;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!taxi_tls_engine()) {
    add("tls-none", TAXI_IO_REACTOR, "any", no_engine_tests);
    return taxi_test_run("taxi TLS streams", list, nsuites, argc, argv);
  }
  if (system("openssl version >/dev/null 2>&1") != 0) {
    printf("tls: SKIP: no openssl command to make the certificates\n");
    return TAXI_TEST_SKIP_STATUS;
  }
  if (tls_make_certs() < 0) {
    printf("tls: the certificates could not be made\n");
    return 1;
  }
  const char *rnames[32];
  int n = taxi_backend_names(rnames, 32);
  for (int i = 0; i < n && i < 32; i++)
    for (int k = TAXI_IO_REACTOR; k <= TAXI_IO_HSHA; k++)
      if (pair_works((taxi_io_dispatcher_t)k, rnames[i]))
        add("tls-pair", (taxi_io_dispatcher_t)k, rnames[i], tls_tests_pair);
  const char *pnames[16];
  int np = taxi_proactor_backend_names(pnames, 16);
  for (int i = 0; i < np && i < 16; i++)
    for (int k = TAXI_IO_PROACTOR; k <= TAXI_IO_PROACTORS; k++)
      if (pair_works((taxi_io_dispatcher_t)k, pnames[i]))
        add("tls-pair", (taxi_io_dispatcher_t)k, pnames[i], tls_tests_pair);
  /* The failures and the foreign peers, over a pool (callbacks in several
   * threads) of the first backend. */
  if (n > 0) {
    add("tls-misc", TAXI_IO_LF, rnames[0], tls_tests_misc);
#ifdef TAXI_HAVE_OPENSSL
    add("tls-peers", TAXI_IO_LF, rnames[0], tls_tests_peers);
#endif
  }
  int rc = taxi_test_run("taxi TLS streams", list, nsuites, argc, argv);
  tls_remove_certs();
  return rc;
}
