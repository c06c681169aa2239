/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_fault.c - the fault sweep on TLS streams:
 *
 *   test_tls_fault [FILTER]
 *
 * A TLS echo between taxi streams (a listener's server streams and
 * CLIENTS client streams of the same context), with the socket reads
 * (recv) and writes (send) of the library failed by the LD_PRELOAD
 * module (tests/fault/fault.c; the program runs itself again with it
 * preloaded), the Nth call after the clients start, for several N so
 * that the failure falls in the handshake and in the middle of records:
 *
 *   - transient: EAGAIN, EINTR (three calls in a row) and short counts
 *     (half the bytes asked for): every client's handshake succeeds and
 *     every byte comes back, checked, and every stream ends cleanly (the
 *     record goes on whole: a short write is finished, a short read is
 *     completed by the next);
 *   - fatal: ECONNRESET on a read, EPIPE on a write (once: the error ends
 *     the stream that met it; the module cannot aim at one descriptor):
 *     one stream closes with exactly that error, as its close reason (and
 *     its handshake's status, if the handshake was not done), at most
 *     the client of that connection fails besides, with a TLS-level error
 *     (TAXI_ETRUNCATED, TAXI_ETLS) or a socket error; every other client
 *     gets all its bytes back.
 *
 * Each case is bounded (no hang: the clients must be done within a
 * limit) and run over the Reactor, Leader/Followers and the Proactor
 * pair (emulated; uring too, where the kernel does the transfers and the
 * module cannot reach them: its cases report "unreached" and check only
 * the echo).  The certificate is made in memory (tests/fuzz/tls_check.c).
 */
#define _GNU_SOURCE 1

#include "config.h"

#include "fault/fault.h"
#include "fuzz/tls_check.h"
#include "suites.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIENTS 3
#define MAX_SEG 6000

/* ---- the server ---------------------------------------------------------- */

typedef struct srv {
  atomic_int accepted, closed, closed_ok, hs_failed;
  atomic_int closed_with[64]; /* by -reason, for the reasons < 64 */
} srv_t;

static void srv_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  if (status == TAXI_EEOF) {
    taxi_stream_end(s);
    return;
  }
  if (taxi_stream_write(s, data, len, NULL, NULL) < 0) taxi_stream_close(s);
}

static void srv_closed(taxi_stream_t *s, int reason) {
  srv_t *v = taxi_stream_data(s);
  if (reason == 0) atomic_fetch_add(&v->closed_ok, 1);
  if (reason < 0 && reason > -64) atomic_fetch_add(&v->closed_with[-reason], 1);
  atomic_fetch_add(&v->closed, 1);
}

static void srv_handshake(taxi_stream_t *s, int status) {
  srv_t *v = taxi_stream_data(s);
  if (status != 0) atomic_fetch_add(&v->hs_failed, 1);
}

static void srv_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  atomic_fetch_add(&((srv_t *)arg)->accepted, 1);
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, srv_closed);
  taxi_stream_read_start(s, srv_read);
}

/* ---- the clients --------------------------------------------------------- */

typedef struct cli {
  taxi_stream_t *s;
  unsigned seed, rnd;
  size_t total, sent, got;
  int bad, hs_status, reason;
  atomic_int done;
} cli_t;

static void cli_send(taxi_stream_t *s) {
  cli_t *c = taxi_stream_data(s);
  static _Thread_local unsigned char seg[MAX_SEG];
  while (c->sent < c->total) {
    c->rnd = c->rnd * 1103515245u + 12345u;
    size_t n = 1 + (c->rnd >> 8) % MAX_SEG;
    if (n > c->total - c->sent) n = c->total - c->sent;
    for (size_t i = 0; i < n; i++) seg[i] = st_byte(c->seed, c->sent + i);
    int rc = taxi_stream_write(s, seg, n, NULL, NULL);
    if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) return; /* on_drain */
    if (rc < 0) {
      taxi_stream_close(s);
      return;
    }
    c->sent += n;
  }
}

static void cli_read(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  cli_t *c = taxi_stream_data(s);
  if (status == TAXI_EEOF) {
    taxi_stream_close(s);
    return;
  }
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    if (p[i] != st_byte(c->seed, c->got + i)) c->bad = 1;
  c->got += len;
  if (c->got == c->total) taxi_stream_shutdown(s); /* the server ends too */
}

static void cli_closed(taxi_stream_t *s, int reason) {
  cli_t *c = taxi_stream_data(s);
  c->reason = reason;
  atomic_store(&c->done, 1);
}

static void cli_handshake(taxi_stream_t *s, int status) {
  ((cli_t *)taxi_stream_data(s))->hs_status = status;
}

static void cli_connected(taxi_stream_t *s, int status, void *arg) {
  (void)arg;
  taxi_stream_on_close(s, cli_closed);
  if (status < 0) return;
  taxi_stream_on_drain(s, cli_send);
  taxi_stream_read_start(s, cli_read);
  cli_send(s); /* queued until the handshake is done */
}

static int cli_start(cli_t *c, st_io_t *io, int port, taxi_tls_context_t *ctx,
                     size_t total, unsigned seed) {
  memset(c, 0, sizeof *c);
  c->seed = seed;
  c->rnd = seed * 2654435761u + 7;
  c->total = total;
  c->hs_status = 1;
  c->reason = 1;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.tls = ctx;
  o.tls_server_name = "localhost";
  o.on_handshake = cli_handshake;
  o.high_watermark = 65536;
  return taxi_stream_connect(&c->s, io->io, addr, &o, cli_connected, c);
}

/* ---- the cases ----------------------------------------------------------- */

static taxi_tls_context_t *server_ctx, *client_ctx;

static int limit_ms(int ms) {
  const char *k = getenv("TAXI_TEST_TIMEOUT_SCALE");
  int scale = k ? atoi(k) : 1;
  return ms * (scale > 1 ? scale : 1);
}

typedef struct fault_case {
  const char *site; /* "read" or "write": the call is the pair's (site_of) */
  const char *what; /* the module's name of the error, or "short" */
  int count;        /* calls failed in a row */
  int code;         /* the stream's close reason it must give; 0: none */
} fault_case_t;

/* The pair of the suite running ("tls-fault[lf:epoll]"): helpers.c sets
 * it when a context is made; the sweep needs it before. */
static void pair_of_suite(void) {
  static char backend[32];
  CU_pSuite suite = CU_get_current_suite();
  const char *open = suite ? strchr(suite->pName, '[') : NULL;
  const char *colon = open ? strchr(open, ':') : NULL;
  const char *close = colon ? strchr(colon, ']') : NULL;
  char head[16];
  if (!close || (size_t)(colon - open) > sizeof head ||
      (size_t)(close - colon) > sizeof backend)
    return;
  memcpy(head, open + 1, (size_t)(colon - open - 1));
  head[colon - open - 1] = '\0';
  memcpy(backend, colon + 1, (size_t)(close - colon - 1));
  backend[close - colon - 1] = '\0';
  if (taxi_io_dispatcher_parse(head, &st_dispatcher) == 0) st_backend = backend;
}

/* The call a stream of the pair reads or writes its socket with: recv and
 * send (ports/posix/sock.c; send for one buffer, which a TLS record's
 * bytes are unless they wrap around the stream's ring, sendmsg for more);
 * the emulated Proactor reads with readv and writes as the sockets do
 * (backends/nbio.c). */
static const char *site_of(const fault_case_t *fc) {
  if (strcmp(fc->site, "write") == 0) return "send";
  return st_dispatcher >= TAXI_IO_PROACTOR ? "readv" : "recv";
}

/* One echo of CLIENTS clients with the fault armed as they start.
 * Returns how many calls were failed (the module's count). */
static unsigned long run_case(const fault_case_t *fc, unsigned nth,
                              size_t total) {
  char spec[128], label[160];
  const char *site = site_of(fc);
  snprintf(spec, sizeof spec, "%s:%u:%s:%d", site, nth, fc->what, fc->count);
  snprintf(label, sizeof label, "[%s:%s] %s",
           taxi_io_dispatcher_name(st_dispatcher), st_backend, spec);
  st_io_t io;
  if (st_io_create(&io) < 0) return 0;
  srv_t v;
  memset(&v, 0, sizeof v);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.flags = TAXI_STREAM_PAUSE_READING;
  so.tls = server_ctx;
  so.on_handshake = srv_handshake;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  taxi_listener_t *l = NULL;
  int port = st_listen(&io, &lo, srv_accept, &v, &l);
  CU_ASSERT_FATAL(port > 0);
  st_io_run(&io);
  CU_ASSERT_EQUAL_FATAL(fault_arm(spec), 0);
  static cli_t c[CLIENTS];
  for (unsigned i = 0; i < CLIENTS; i++)
    CU_ASSERT_EQUAL(
        cli_start(&c[i], &io, port, client_ctx, total, nth * 16 + i), 0);
  taxi_time_t start = taxi_now();
  int all_done = 1;
  for (unsigned i = 0; i < CLIENTS; i++)
    while (!atomic_load(&c[i].done)) {
      if (util_elapsed_ms(start) > limit_ms(10000)) {
        all_done = 0;
        break;
      }
      util_sleep_ms(1);
    }
  /* The server's streams close after their clients: wait for them too
   * (a fatal case's connection may end on the server side only). */
  while (all_done && atomic_load(&v.closed) < atomic_load(&v.accepted) &&
         util_elapsed_ms(start) < limit_ms(10000))
    util_sleep_ms(1);
  unsigned long injected = fault_injected(site);
  fault_arm("");
  CU_ASSERT(all_done); /* no hang */
  if (!all_done) printf("\n  %s: a client was not done in time\n", label);
  CU_ASSERT_EQUAL(atomic_load(&v.closed), atomic_load(&v.accepted));

  unsigned ok = 0, failed = 0;
  for (unsigned i = 0; i < CLIENTS && all_done; i++) {
    CU_ASSERT_EQUAL(c[i].bad, 0); /* what arrived is what was sent */
    if (c[i].reason == 0 && c[i].got == c[i].total && c[i].hs_status == 0) {
      ok++;
      continue;
    }
    failed++;
    int r = c[i].reason;
    /* The client of the connection that failed: the error itself, or
     * what its peer's end looks like through TLS. */
    int allowed = r == fc->code || r == TAXI_ETRUNCATED || r == TAXI_ETLS ||
                  r == TAXI_ECONNRESET || r == TAXI_EPIPE || r == TAXI_EEOF;
    CU_ASSERT(allowed);
    /* The handshake's end was told with an error if it had not ended. */
    CU_ASSERT(c[i].hs_status <= 0);
    if (c[i].hs_status < 0) CU_ASSERT(c[i].hs_status == r || r < 0);
    if (!allowed || c[i].hs_status > 0)
      printf(
          "\n  %s: client %u closed with %s, handshake %s, %zu of %zu "
          "bytes back\n",
          label, i, taxi_strerror(r),
          c[i].hs_status > 0 ? "not told" : taxi_strerror(c[i].hs_status),
          c[i].got, c[i].total);
  }
  int server_err = fc->code ? atomic_load(&v.closed_with[-fc->code]) : 0;
  if (fc->code == 0 || injected == 0) {
    /* Transient (or not reached): everything arrives, all end cleanly. */
    CU_ASSERT_EQUAL(failed, 0);
    CU_ASSERT_EQUAL(atomic_load(&v.hs_failed), 0);
    CU_ASSERT_EQUAL(atomic_load(&v.closed_ok), CLIENTS);
    if (failed)
      printf("\n  %s: %u of %d clients failed (injected %lu)\n", label, failed,
             CLIENTS, injected);
  } else {
    /* Fatal: one stream met the error, and only its connection is lost.
     * Its peer may meet the same error for real: a socket closed with
     * bytes unread sends a reset. */
    int client_err = 0;
    for (unsigned i = 0; i < CLIENTS; i++)
      if (c[i].reason == fc->code) client_err++;
    CU_ASSERT(client_err + server_err >= 1);
    CU_ASSERT(client_err <= 1 && server_err <= 1);
    CU_ASSERT(failed <= 1);
    CU_ASSERT(ok >= CLIENTS - 1);
    if (client_err + server_err < 1 || client_err > 1 || server_err > 1 ||
        failed > 1)
      printf(
          "\n  %s: %d client and %d server streams closed with %s; %u "
          "clients failed\n",
          label, client_err, server_err, taxi_strerror(fc->code), failed);
  }
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
  st_io_destroy(&io);
  return injected;
}

/* Uring transfers in the kernel: nothing of them reaches the module. */
static int unreachable(void) {
  return st_dispatcher >= TAXI_IO_PROACTOR && strcmp(st_backend, "uring") == 0;
}

static void sweep(const fault_case_t *fc) {
  pair_of_suite();
  if (!fault_available()) {
    printf("\n  SKIP: %s\n", fault_unavailable_reason());
    return;
  }
  /* The first calls are the handshake's; later ones fall inside the
   * records of the echo (records of up to 16 KiB, sent in segments of up
   * to MAX_SEG bytes, so a read or write at any point is mid-record). */
  static const unsigned full[] = {1, 2, 3, 4, 6, 9, 14, 20, 30};
  static const unsigned small[] = {1, 3, 6, 14};
  const unsigned *n = util_test_small() ? small : full;
  size_t count = util_test_small() ? sizeof small / sizeof *small
                                   : sizeof full / sizeof *full;
  size_t total = util_test_small() ? 40000 : 120000;
  unsigned reached = 0;
  for (size_t i = 0; i < count; i++)
    if (run_case(fc, n[i], total) > 0) reached++;
  if (unreachable())
    printf("\n  %s %s: unreached (the kernel transfers)\n", site_of(fc),
           fc->what);
  else
    CU_ASSERT(reached > 0); /* the calls were failed, not missed */
}

#define CASE(name, site, what, count, code)                   \
  static void name(void) {                                    \
    static const fault_case_t fc = {site, what, count, code}; \
    sweep(&fc);                                               \
  }
CASE(test_recv_eagain, "read", "EAGAIN", 3, 0)
CASE(test_recv_eintr, "read", "EINTR", 3, 0)
CASE(test_recv_short, "read", "short", 3, 0)
CASE(test_send_eagain, "write", "EAGAIN", 3, 0)
CASE(test_send_eintr, "write", "EINTR", 3, 0)
CASE(test_send_short, "write", "short", 3, 0)
CASE(test_recv_reset, "read", "ECONNRESET", 1, TAXI_ECONNRESET)
CASE(test_send_epipe, "write", "EPIPE", 1, TAXI_EPIPE)

static CU_TestInfo fault_tests[] = {
    {"reads: EAGAIN mid-record, the record goes on", test_recv_eagain},
    {"reads: EINTR mid-record, the record goes on", test_recv_eintr},
    {"reads: short counts, the record goes on", test_recv_short},
    {"writes: EAGAIN mid-record, the record goes on", test_send_eagain},
    {"writes: EINTR mid-record, the record goes on", test_send_eintr},
    {"writes: short counts, the rest of the record follows", test_send_short},
    {"reads: ECONNRESET closes that stream only", test_recv_reset},
    {"writes: EPIPE closes that stream only", test_send_epipe},
    CU_TEST_INFO_NULL,
};

/* ---- the program --------------------------------------------------------- */

#define MAX_SUITES 8

static taxi_test_suite_t suites[MAX_SUITES];
static const taxi_test_suite_t *list[MAX_SUITES];
static char names[MAX_SUITES][96];
static size_t nsuites;

static void add(taxi_io_dispatcher_t d, const char *b) {
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = d;
  o.backend = b;
  taxi_io_t *io;
  if (nsuites == MAX_SUITES || taxi_io_create(&io, &o) < 0) return;
  taxi_io_destroy(io);
  snprintf(names[nsuites], sizeof names[nsuites], "tls-fault[%s:%s]",
           taxi_io_dispatcher_name(d), b);
  suites[nsuites].name = names[nsuites];
  suites[nsuites].tests = fault_tests;
  suites[nsuites].timeout_s = 300;
  list[nsuites] = &suites[nsuites];
  nsuites++;
}

static void contexts_free(void) {
  if (server_ctx) taxi_tls_context_unref(server_ctx);
  if (client_ctx) taxi_tls_context_unref(client_ctx);
  server_ctx = client_ctx = NULL;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  fault_reexec_preloaded(argc, argv);
  char why[256];
  if (tls_check_init(why, sizeof why) != 0) {
    printf("tls-fault: %s\n", why);
    return 1;
  }
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = tls_check_cert_file();
  o.key_file = tls_check_key_file();
  int rc = taxi_tls_server_create(&server_ctx, &o);
  taxi_tls_options_init(&o);
  o.ca_file = tls_check_cert_file();
  if (rc == 0) rc = taxi_tls_client_create(&client_ctx, &o);
  if (rc < 0) {
    printf("tls-fault: contexts: %s\n", taxi_error_detail());
    contexts_free();
    tls_check_fini();
    return 1;
  }
  const char *first = NULL;
  const char *rnames[32];
  int n = taxi_backend_names(rnames, 32);
  for (int i = 0; i < n && !first; i++)
    if (strcmp(rnames[i], "epoll") == 0 || i == n - 1) first = rnames[i];
  if (first) {
    add(TAXI_IO_REACTOR, first);
    add(TAXI_IO_LF, first);
  }
  add(TAXI_IO_PROACTOR, "emulated");
  add(TAXI_IO_PROACTOR, "uring");
  rc =
      taxi_test_run("taxi TLS streams under faults", list, nsuites, argc, argv);
  contexts_free();
  tls_check_fini();
  return rc;
}
