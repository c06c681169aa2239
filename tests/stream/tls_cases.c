/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_cases.c - TLS streams, taxi against taxi: refusals of
 * bad input, handshake failures (each with its error, that stream closed,
 * another undisturbed), ALPN, an SNI callback, session resumption and a
 * listener's context replaced while its streams go on.
 */
#define _GNU_SOURCE 1

#include "tls_common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- bad input ------------------------------------------------------------
 */

static void test_bad_input(void) {
  taxi_tls_options_t o;
  taxi_tls_context_t *c = NULL;
  CU_ASSERT_EQUAL(taxi_tls_server_create(NULL, NULL), TAXI_EINVAL);
  taxi_tls_options_init(&o);
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "cert_file") != NULL);
  o.cert_file = tls_path("nothing.pem");
  o.key_file = tls_path("srv.key");
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_ENOENT);
  o.cert_file = tls_path("srv.pem");
  o.key_file = tls_path("other.key"); /* not the certificate's */
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_ETLS);
  CU_ASSERT(strstr(taxi_error_detail(), "key_file") != NULL);
  o.key_file = tls_path("srv.key");
  o.alpn = "h2,,x";
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "alpn") != NULL);
  o.alpn = NULL;
  o.flags = 0x100;
  CU_ASSERT_EQUAL(taxi_tls_server_create(&c, &o), TAXI_EINVAL);
  o.flags = 0;
  CU_ASSERT_PTR_NULL(c);
  CU_ASSERT_EQUAL(taxi_tls_context_ref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_tls_context_unref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_tls_context_is_server(NULL), TAXI_EINVAL);
  CU_ASSERT_STRING_EQUAL(taxi_tls_error_text(NULL), "");
  CU_ASSERT_PTR_NOT_NULL(taxi_tls_engine());

  taxi_tls_context_t *sc = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client("ca", NULL);
  CU_ASSERT_EQUAL(taxi_tls_context_is_server(sc), 1);
  CU_ASSERT_EQUAL(taxi_tls_context_is_server(cc), 0);
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  /* A listener's streams are servers, a connect's a client. */
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.tls = cc;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  taxi_listener_t *l;
  CU_ASSERT_EQUAL(
      taxi_listener_create(&l, io.io, "127.0.0.1:0", &lo, tls_srv_accept, NULL),
      TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "tls") != NULL);
  so.tls = sc;
  taxi_stream_t *s;
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&s, io.io, "127.0.0.1:9", &so, NULL, NULL),
      TAXI_EINVAL);
  /* A name without a context; a client that verifies with no name. */
  so.tls = NULL;
  so.tls_server_name = "localhost";
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&s, io.io, "127.0.0.1:9", &so, NULL, NULL),
      TAXI_EINVAL);
  so.tls = cc;
  so.tls_server_name = NULL;
  int sv[2];
  CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  CU_ASSERT_EQUAL(taxi_stream_open(&s, io.io, sv[0], &so), TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "tls_server_name") != NULL);
  /* A program built before the TLS fields: its shorter options work. */
  so = (taxi_stream_options_t)TAXI_STREAM_OPTIONS_INIT;
  so.size = offsetof(taxi_stream_options_t, tls);
  CU_ASSERT_EQUAL(taxi_stream_open(&s, io.io, sv[0], &so), 0);
  taxi_tls_info_t info = {.size = sizeof info};
  CU_ASSERT_EQUAL(taxi_tls_info(s, &info), TAXI_ENOENT);
  CU_ASSERT_STRING_EQUAL(taxi_tls_error_text(s), "");
  CU_ASSERT_EQUAL(taxi_listener_set_tls(NULL, sc), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  st_io_run(&io);
  st_io_destroy(&io);
  close(sv[1]);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(cc);
}

/* ---- handshake failures ---------------------------------------------------
 */

/* A server of cert `name`, a client trusting ca_name that connects to
 * it as `host` (NULL: 127.0.0.1): the client's failure is `want`, with
 * `text` in its reason; the server's stream fails with TAXI_ETLS; an
 * echo through a good server at the same time is undisturbed. */
static void fails(const char *name, const char *ca_name, const char *host,
                  int want, const char *text) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *bad = tls_server(name, NULL);
  taxi_tls_context_t *good = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client(ca_name, NULL);
  taxi_tls_context_t *cgood = tls_client("ca", NULL);
  tls_srv_t vb, vg;
  tls_srv_init(&vb);
  tls_srv_init(&vg);
  int pb = tls_listen(&io, bad, &vb, NULL);
  int pg = tls_listen(&io, good, &vg, NULL);
  st_io_run(&io);
  tls_cli_t c[2];
  CU_ASSERT_EQUAL(tls_cli_start(&c[0], &io, pg, cgood, NULL, 200000, 3000, 1),
                  0);
  CU_ASSERT_EQUAL(tls_cli_start(&c[1], &io, pb, cc, host, 1000, 100, 2), 0);
  CU_ASSERT(tls_cli_wait(c, 2, 30000));
  CU_ASSERT_EQUAL(c[1].hs_status, want);
  CU_ASSERT_EQUAL(c[1].reason, want);
  CU_ASSERT(strstr(c[1].why, text) != NULL);
  CU_ASSERT_EQUAL(c[1].got, 0);
  CU_ASSERT(tls_wait_count(&vb.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&vb.hs_failed), 1);
  CU_ASSERT_EQUAL(atomic_load(&vb.last_close), TAXI_ETLS);
  pthread_mutex_lock(&vb.lock);
  CU_ASSERT(strstr(vb.why, "alert") != NULL);
  printf("(client: %s \"%s\"; server: %s \"%s\") ",
         taxi_error_name(c[1].reason), c[1].why,
         taxi_error_name(atomic_load(&vb.last_close)), vb.why);
  pthread_mutex_unlock(&vb.lock);
  /* The other stream went on. */
  CU_ASSERT_EQUAL(c[0].reason, 0);
  CU_ASSERT_EQUAL(c[0].got, 200000);
  CU_ASSERT_EQUAL(c[0].bad, 0);
  st_io_destroy(&io);
  taxi_tls_context_unref(bad);
  taxi_tls_context_unref(good);
  taxi_tls_context_unref(cc);
  taxi_tls_context_unref(cgood);
}

static void test_expired(void) {
  fails("expired", "ca", NULL, TAXI_EBADCERT, "expired");
}

static void test_wrong_name(void) {
  fails("other", "ca", "localhost", TAXI_EBADCERT, "mismatch");
}

static void test_untrusted(void) {
  fails("self", "ca", NULL, TAXI_EBADCERT, "self-signed");
}

static void test_wrong_ip(void) {
  /* The certificate names other.example only: 127.0.0.1 is checked as
   * an IP address. */
  fails("other", "ca", NULL, TAXI_EBADCERT, "IP address mismatch");
}

/* A plain-text client to a TLS listener: that stream fails, TAXI_ETLS. */
static void test_plain_client(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  tls_srv_t v;
  tls_srv_init(&v);
  int port = tls_listen(&io, sc, &v, NULL);
  st_io_run(&io);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  const char req[] = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
  CU_ASSERT_EQUAL(net_send_all(fd, req, sizeof req - 1), 0);
  char buf[4096];
  long n = st_recv_to_eof(fd, buf, sizeof buf);
  CU_ASSERT(n >= 0); /* an alert at most, then the end */
  close(fd);
  CU_ASSERT(tls_wait_count(&v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&v.last_hs), TAXI_ETLS);
  CU_ASSERT_EQUAL(atomic_load(&v.last_close), TAXI_ETLS);
  pthread_mutex_lock(&v.lock);
  CU_ASSERT(strlen(v.why) > 0);
  printf("(server: \"%s\") ", v.why);
  pthread_mutex_unlock(&v.lock);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
}

/* ---- ALPN, SNI, resumption ------------------------------------------------
 */

static void alpn_case(const char *client, const char *server,
                      const char *want) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", server);
  taxi_tls_context_t *cc = tls_client("ca", client);
  tls_srv_t v;
  tls_srv_init(&v);
  int port = tls_listen(&io, sc, &v, NULL);
  st_io_run(&io);
  tls_cli_t c;
  CU_ASSERT_EQUAL(tls_cli_start(&c, &io, port, cc, NULL, 100, 10, 3), 0);
  CU_ASSERT(tls_cli_wait(&c, 1, 20000));
  CU_ASSERT_EQUAL(c.reason, 0);
  CU_ASSERT_STRING_EQUAL(c.info.alpn, want);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(cc);
}

static void test_alpn(void) {
  /* The server picks the first of its own list the client offers. */
  alpn_case("x-none,http/1.1,h2", "h2,http/1.1", "h2");
  alpn_case("http/1.1", "h2,http/1.1", "http/1.1");
  alpn_case("spdy/1", "h2", ""); /* nothing in common: no ALPN */
  alpn_case(NULL, "h2", "");
}

static taxi_tls_context_t *alt_ctx;
static atomic_int sni_calls;

static taxi_tls_context_t *pick(const char *name, void *arg) {
  (void)arg;
  atomic_fetch_add(&sni_calls, 1);
  return strcmp(name, "alt.test") == 0 ? alt_ctx : NULL;
}

static void test_sni(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_options_t o;
  taxi_tls_options_init(&o);
  o.cert_file = tls_path("srv.pem");
  o.key_file = tls_path("srv.key");
  o.on_sni = pick;
  taxi_tls_context_t *sc = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_tls_server_create(&sc, &o), 0);
  alt_ctx = tls_server("alt", "h2");
  taxi_tls_context_t *cc = tls_client("ca", "h2");
  tls_srv_t v;
  tls_srv_init(&v);
  int port = tls_listen(&io, sc, &v, NULL);
  st_io_run(&io);
  tls_cli_t c[2];
  /* alt.test: the callback's context, whose certificate names it (the
   * client verifies that name) and whose ALPN list answers. */
  CU_ASSERT_EQUAL(tls_cli_start(&c[0], &io, port, cc, "alt.test", 50, 5, 4), 0);
  CU_ASSERT(tls_cli_wait(c, 1, 20000));
  CU_ASSERT_EQUAL(c[0].reason, 0);
  CU_ASSERT_STRING_EQUAL(c[0].info.server_name, "alt.test");
  CU_ASSERT_STRING_EQUAL(c[0].info.alpn, "h2");
  pthread_mutex_lock(&v.lock);
  CU_ASSERT_STRING_EQUAL(v.sni, "alt.test");
  pthread_mutex_unlock(&v.lock);
  /* localhost: the listener's own. */
  CU_ASSERT_EQUAL(tls_cli_start(&c[1], &io, port, cc, "localhost", 50, 5, 5),
                  0);
  CU_ASSERT(tls_cli_wait(c + 1, 1, 20000));
  CU_ASSERT_EQUAL(c[1].reason, 0);
  CU_ASSERT_STRING_EQUAL(c[1].info.alpn, "");
  CU_ASSERT_EQUAL(atomic_load(&sni_calls), 2);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(alt_ctx);
  taxi_tls_context_unref(cc);
}

static void test_resume(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client("ca", NULL);
  tls_srv_t v;
  tls_srv_init(&v);
  int port = tls_listen(&io, sc, &v, NULL);
  st_io_run(&io);
  tls_cli_t c[3];
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(
        tls_cli_start(&c[i], &io, port, cc, NULL, 1000, 100, (unsigned)i), 0);
    CU_ASSERT(tls_cli_wait(c + i, 1, 20000));
    CU_ASSERT_EQUAL(c[i].reason, 0);
  }
  CU_ASSERT_EQUAL(c[0].info.resumed, 0);
  CU_ASSERT_EQUAL(c[1].info.resumed, 1);
  /* Another context keeps its own sessions: a full handshake. */
  taxi_tls_context_t *cc2 = tls_client("ca", NULL);
  CU_ASSERT_EQUAL(tls_cli_start(&c[2], &io, port, cc2, NULL, 10, 10, 2), 0);
  CU_ASSERT(tls_cli_wait(c + 2, 1, 20000));
  CU_ASSERT_EQUAL(c[2].reason, 0);
  CU_ASSERT_EQUAL(c[2].info.resumed, 0);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(cc);
  taxi_tls_context_unref(cc2);
}

/* ---- a listener's context replaced ----------------------------------------
 */

/* A stream that echoes on demand: the test writes, the read callback
 * counts what comes back. */
typedef struct held {
  atomic_int connected, got, done;
  int reason;
} held_t;

static void held_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  held_t *h = taxi_stream_data(s);
  (void)d;
  if (status == 0) atomic_fetch_add(&h->got, (int)n);
}

static void held_closed(taxi_stream_t *s, int reason) {
  held_t *h = taxi_stream_data(s);
  h->reason = reason;
  atomic_store(&h->done, 1);
}

static void held_connected(taxi_stream_t *s, int status, void *arg) {
  (void)arg;
  taxi_stream_on_close(s, held_closed);
  if (status == 0) taxi_stream_read_start(s, held_read);
}

static void held_handshake(taxi_stream_t *s, int status) {
  held_t *h = taxi_stream_data(s);
  if (status == 0) atomic_store(&h->connected, 1);
}

static void held_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                          size_t len, void *arg) {
  (void)s;
  (void)h;
  (void)unread;
  (void)len;
  (void)arg;
  CU_FAIL("a TLS stream was detached");
}

static void test_reload(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *s1 = tls_server("srv", NULL);
  taxi_tls_context_t *s2 = tls_server("srv2", NULL); /* by ca2 */
  taxi_tls_context_t *c1 = tls_client("ca", NULL);
  taxi_tls_context_t *c2 = tls_client("ca2", NULL);
  tls_srv_t v;
  tls_srv_init(&v);
  taxi_listener_t *l;
  int port = tls_listen(&io, s1, &v, &l);
  st_io_run(&io);
  /* A stream made with the first context stays open over the reload. */
  held_t h;
  memset(&h, 0, sizeof h);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.tls = c1;
  o.on_handshake = held_handshake;
  taxi_stream_t *hs;
  CU_ASSERT_EQUAL_FATAL(
      taxi_stream_connect(&hs, io.io, addr, &o, held_connected, &h), 0);
  CU_ASSERT(util_wait_flag(&h.connected, 1, 10000));
  CU_ASSERT_EQUAL(taxi_stream_write(hs, "before", 6, NULL, NULL), 0);
  CU_ASSERT(tls_wait_count(&h.got, 6, 10000));

  CU_ASSERT_EQUAL(taxi_listener_set_tls(l, s2), 0);
  taxi_tls_context_unref(s2); /* the listener holds it */
  CU_ASSERT_EQUAL(taxi_listener_set_tls(l, c1), TAXI_EINVAL);
  tls_cli_t c[2];
  /* New connections get the new certificate: trusted by ca2 only. */
  CU_ASSERT_EQUAL(tls_cli_start(&c[0], &io, port, c2, NULL, 3000, 300, 1), 0);
  CU_ASSERT_EQUAL(tls_cli_start(&c[1], &io, port, c1, NULL, 3000, 300, 2), 0);
  CU_ASSERT(tls_cli_wait(c, 2, 20000));
  CU_ASSERT_EQUAL(c[0].reason, 0);
  CU_ASSERT_EQUAL(c[0].got, 3000);
  CU_ASSERT_EQUAL(c[1].reason, TAXI_EBADCERT);
  /* The old stream keeps its session. */
  CU_ASSERT_EQUAL(taxi_stream_write(hs, "after", 5, NULL, NULL), 0);
  CU_ASSERT(tls_wait_count(&h.got, 11, 10000));
  /* Its session cannot leave with the socket. */
  CU_ASSERT_EQUAL(taxi_stream_detach(hs, held_detached, NULL), TAXI_ENOTSUP);
  taxi_tls_info_t small = {.size = 1};
  CU_ASSERT_EQUAL(taxi_tls_info(hs, &small), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_close(hs), 0);
  CU_ASSERT(util_wait_flag(&h.done, 1, 10000));
  CU_ASSERT_EQUAL(h.reason, 0);
  st_io_destroy(&io);
  taxi_tls_context_unref(s1);
  taxi_tls_context_unref(c1);
  taxi_tls_context_unref(c2);
}

CU_TestInfo tls_tests_misc[] = {
    {"bad input: refused with a detail", test_bad_input},
    {"an expired certificate: TAXI_EBADCERT, others undisturbed", test_expired},
    {"another host's certificate: TAXI_EBADCERT", test_wrong_name},
    {"an IP address the certificate does not name: TAXI_EBADCERT",
     test_wrong_ip},
    {"an untrusted authority: TAXI_EBADCERT", test_untrusted},
    {"a plain-text client: TAXI_ETLS", test_plain_client},
    {"ALPN both ways", test_alpn},
    {"an SNI callback chooses a context", test_sni},
    {"session resumption per context and host:port", test_resume},
    {"a listener's context replaced: new streams only", test_reload},
    CU_TEST_INFO_NULL};
