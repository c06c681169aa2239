/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_peers.c - TLS streams against peers that are not
 * taxi: the openssl command's s_server and s_client (spawned here), and
 * a client written on OpenSSL in this file (blocking, on its own socket)
 * for what the command cannot do on demand: a renegotiation, garbage
 * after a ClientHello, a connection dropped without close_notify.
 */
#define _GNU_SOURCE 1

#include "config.h"

#include "tls_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* A port free a moment ago (for s_server, which needs one named). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* Run `cmd` with sh, stdin from `in` (NULL: /dev/null), stdout and
 * stderr into `out` (NULL: /dev/null): the child's pid, or -1. */
static pid_t spawn(const char *cmd, const char *in, const char *out) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int i = open(in ? in : "/dev/null", O_RDONLY);
  int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (i < 0 || o < 0) _exit(126);
  dup2(i, 0);
  dup2(o, 1);
  dup2(o, 2);
  execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
  _exit(127);
}

/* Wait (bounded) until something accepts on port. */
static int wait_listening(int port) {
  taxi_time_t start = taxi_now();
  while (util_elapsed_ms(start) < 10000) {
    int fd = net_connect_loopback(port, 0, 1, 0);
    if (fd >= 0) {
      close(fd);
      return 1;
    }
    util_sleep_ms(20);
  }
  return 0;
}

static long file_read(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  size_t got = 0;
  for (;;) {
    ssize_t k = read(fd, buf + got, cap - got);
    if (k <= 0 || got + (size_t)k == cap) {
      got += k > 0 ? (size_t)k : 0;
      break;
    }
    got += (size_t)k;
  }
  close(fd);
  return (long)got;
}

/* ---- s_client against a taxi server ---------------------------------------
 */

#define CLIENT_LEN 50000

typedef struct counted {
  tls_srv_t v;
  atomic_long echoed;
} counted_t;

/* Echo, and end once CLIENT_LEN bytes went back: s_client (with
 * -ign_eof) exits when it reads our close_notify. */
static void counted_read(taxi_stream_t *s, int status, const void *data,
                         size_t len) {
  counted_t *c = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_end(s);
    return;
  }
  if (taxi_stream_write(s, data, len, NULL, NULL) < 0) taxi_stream_close(s);
  if (atomic_fetch_add(&c->echoed, (long)len) + (long)len >= CLIENT_LEN)
    taxi_stream_end(s);
}

static void counted_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  tls_srv_accept(l, s, arg);
  taxi_stream_read_start(s, counted_read);
}

static void test_s_client(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", "h2,http/1.1");
  counted_t c;
  tls_srv_init(&c.v);
  atomic_init(&c.echoed, 0);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.tls = sc;
  so.on_handshake = tls_srv_handshake;
  so.high_watermark = 2 * CLIENT_LEN;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&io, &lo, counted_accept, &c, NULL);
  st_io_run(&io);
  char *in = malloc(CLIENT_LEN), *out = malloc(CLIENT_LEN * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  /* Printable lines: s_client passes them through as they are. */
  for (size_t i = 0; i < CLIENT_LEN; i++)
    in[i] = (i % 64 == 63) ? '\n' : (char)('a' + st_byte(5, i) % 26);
  int fd = open(tls_path("client.in"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CU_ASSERT_EQUAL(write(fd, in, CLIENT_LEN), CLIENT_LEN);
  close(fd);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "exec openssl s_client -connect 127.0.0.1:%d -servername localhost "
           "-CAfile '%s' -verify_return_error -alpn h2 -quiet -ign_eof "
           "2>'%s'",
           port, tls_path("ca.pem"), tls_path("client.err"));
  pid_t pid = spawn(cmd, tls_path("client.in"), tls_path("client.out"));
  int st = util_wait_child(pid, 30000);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  long n = file_read(tls_path("client.out"), out, CLIENT_LEN * 2);
  CU_ASSERT_EQUAL(n, CLIENT_LEN);
  CU_ASSERT(n == CLIENT_LEN && memcmp(in, out, CLIENT_LEN) == 0);
  CU_ASSERT(tls_wait_count(&c.v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&c.v.hs_ok), 1);
  pthread_mutex_lock(&c.v.lock);
  CU_ASSERT_STRING_EQUAL(c.v.sni, "localhost");
  pthread_mutex_unlock(&c.v.lock);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  free(in);
  free(out);
}

/* A client speaking TLS 1.0 only (the openssl command's default
 * security level refuses to: level 0 lets it): the server refuses it. */
static void test_tls10_client(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  tls_srv_t v;
  tls_srv_init(&v);
  int port = tls_listen(&io, sc, &v, NULL);
  st_io_run(&io);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "exec openssl s_client -connect 127.0.0.1:%d -tls1 "
           "-cipher 'DEFAULT@SECLEVEL=0'",
           port);
  pid_t pid = spawn(cmd, NULL, tls_path("tls10.out"));
  int st = util_wait_child(pid, 20000);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) != 0); /* refused */
  CU_ASSERT(tls_wait_count(&v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&v.last_hs), TAXI_ETLS);
  CU_ASSERT_EQUAL(atomic_load(&v.last_close), TAXI_ETLS);
  pthread_mutex_lock(&v.lock);
  CU_ASSERT(strstr(v.why, "protocol") != NULL);
  printf("(server: \"%s\") ", v.why);
  pthread_mutex_unlock(&v.lock);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
}

/* ---- a taxi client against s_server ---------------------------------------
 */

typedef struct rev {
  char got[256];
  size_t len;
  atomic_int lines, done;
  int reason;
  char why[256];
  taxi_tls_info_t info;
} rev_t;

static void rev_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  rev_t *r = taxi_stream_data(s);
  if (status < 0) return;
  for (size_t i = 0; i < n && r->len < sizeof r->got - 1; i++) {
    r->got[r->len++] = ((const char *)d)[i];
    if (((const char *)d)[i] == '\n') atomic_fetch_add(&r->lines, 1);
  }
}

static void rev_closed(taxi_stream_t *s, int reason) {
  rev_t *r = taxi_stream_data(s);
  r->reason = reason;
  snprintf(r->why, sizeof r->why, "%s", taxi_tls_error_text(s));
  atomic_store(&r->done, 1);
}

static void rev_handshake(taxi_stream_t *s, int status) {
  rev_t *r = taxi_stream_data(s);
  r->info.size = sizeof r->info;
  if (status == 0) taxi_tls_info(s, &r->info);
}

static void rev_connected(taxi_stream_t *s, int status, void *arg) {
  (void)arg;
  taxi_stream_on_close(s, rev_closed);
  if (status == 0) taxi_stream_read_start(s, rev_read);
}

static void test_s_server(void) {
  int port = free_port();
  CU_ASSERT_FATAL(port > 0);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "exec openssl s_server -accept 127.0.0.1:%d -cert '%s' -key '%s' "
           "-alpn h2,http/1.1 -rev -quiet",
           port, tls_path("srv.pem"), tls_path("srv.key"));
  pid_t pid = spawn(cmd, NULL, tls_path("server.out"));
  CU_ASSERT_FATAL(wait_listening(port));
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *cc = tls_client("ca", "x-other,http/1.1");
  st_io_run(&io);
  rev_t r;
  memset(&r, 0, sizeof r);
  char addr[64];
  snprintf(addr, sizeof addr, "localhost:%d", port);
  taxi_stream_options_t o = TAXI_STREAM_OPTIONS_INIT;
  o.tls = cc;
  o.on_handshake = rev_handshake;
  taxi_stream_t *s;
  CU_ASSERT_EQUAL_FATAL(
      taxi_stream_connect(&s, io.io, addr, &o, rev_connected, &r), 0);
  CU_ASSERT_EQUAL(taxi_stream_write(s, "hello taxi\n", 11, NULL, NULL), 0);
  CU_ASSERT(util_wait_flag(&r.lines, 1, 10000));
  CU_ASSERT(strncmp(r.got, "ixat olleh\n", 11) == 0);
  CU_ASSERT_STRING_EQUAL(r.info.alpn, "http/1.1");
  CU_ASSERT_STRING_EQUAL(r.info.server_name, "localhost");
  /* The server goes without close_notify: reported, not the end. */
  kill(pid, SIGKILL);
  util_wait_child(pid, 10000);
  CU_ASSERT(util_wait_flag(&r.done, 1, 10000));
  CU_ASSERT_EQUAL(r.reason, TAXI_ETRUNCATED);
  CU_ASSERT(strstr(r.why, "close_notify") != NULL);
  st_io_destroy(&io);
  taxi_tls_context_unref(cc);
}

/* ---- an OpenSSL client of our own ---------------------------------------
 */

typedef struct raw {
  int fd;
  SSL_CTX *ctx;
  SSL *ssl;
} raw_t;

static int raw_connect(raw_t *r, int port, int max_version) {
  memset(r, 0, sizeof *r);
  r->fd = st_connect(port);
  r->ctx = SSL_CTX_new(TLS_client_method());
  if (r->fd < 0 || !r->ctx) return -1;
  SSL_CTX_set_verify(r->ctx, SSL_VERIFY_NONE, NULL);
  if (max_version) SSL_CTX_set_max_proto_version(r->ctx, max_version);
  r->ssl = SSL_new(r->ctx);
  if (!r->ssl || SSL_set_fd(r->ssl, r->fd) != 1) return -1;
  return SSL_connect(r->ssl) == 1 ? 0 : -1;
}

static void raw_free(raw_t *r) {
  if (r->ssl) SSL_free(r->ssl);
  if (r->ctx) SSL_CTX_free(r->ctx);
  if (r->fd >= 0) close(r->fd);
  ERR_clear_error();
}

/* Send and read back an echo of n bytes: 0 or -1. */
static int raw_echo(raw_t *r, const char *msg) {
  size_t n = strlen(msg), got = 0;
  char buf[256];
  if (SSL_write(r->ssl, msg, (int)n) != (int)n) return -1;
  while (got < n) {
    int k = SSL_read(r->ssl, buf + got, (int)(sizeof buf - got));
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return memcmp(buf, msg, n) == 0 ? 0 : -1;
}

typedef struct peer_srv {
  st_io_t io;
  taxi_tls_context_t *sc;
  tls_srv_t v;
  int port;
} peer_srv_t;

static int peer_srv_start(peer_srv_t *p) {
  if (st_io_create(&p->io) < 0) return -1;
  p->sc = tls_server("srv", NULL);
  tls_srv_init(&p->v);
  p->port = tls_listen(&p->io, p->sc, &p->v, NULL);
  st_io_run(&p->io);
  return p->port > 0 ? 0 : -1;
}

static void peer_srv_stop(peer_srv_t *p) {
  st_io_destroy(&p->io);
  taxi_tls_context_unref(p->sc);
}

static void test_close_notify(void) {
  peer_srv_t p;
  if (peer_srv_start(&p) < 0) return;
  raw_t r;
  CU_ASSERT_EQUAL_FATAL(raw_connect(&r, p.port, 0), 0);
  CU_ASSERT_EQUAL(raw_echo(&r, "ping"), 0);
  /* Ours: the server reads the end, ends, and its close_notify comes. */
  CU_ASSERT(SSL_shutdown(r.ssl) >= 0);
  char buf[16];
  CU_ASSERT_EQUAL(SSL_read(r.ssl, buf, sizeof buf), 0);
  CU_ASSERT_EQUAL(SSL_get_error(r.ssl, 0), SSL_ERROR_ZERO_RETURN);
  CU_ASSERT(tls_wait_count(&p.v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&p.v.eofs), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.v.last_close), 0);
  raw_free(&r);
  peer_srv_stop(&p);
}

static void test_truncated(void) {
  peer_srv_t p;
  if (peer_srv_start(&p) < 0) return;
  raw_t r;
  CU_ASSERT_EQUAL_FATAL(raw_connect(&r, p.port, 0), 0);
  CU_ASSERT_EQUAL(raw_echo(&r, "ping"), 0);
  /* Gone without close_notify: TAXI_ETRUNCATED, not the end. */
  close(r.fd);
  r.fd = -1;
  CU_ASSERT(tls_wait_count(&p.v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&p.v.eofs), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.v.last_close), TAXI_ETRUNCATED);
  pthread_mutex_lock(&p.v.lock);
  CU_ASSERT(strstr(p.v.why, "close_notify") != NULL);
  pthread_mutex_unlock(&p.v.lock);
  raw_free(&r);
  peer_srv_stop(&p);
}

static void test_renegotiation(void) {
  peer_srv_t p;
  if (peer_srv_start(&p) < 0) return;
  raw_t r;
  /* TLS 1.2: 1.3 has no renegotiation at all. */
  CU_ASSERT_EQUAL_FATAL(raw_connect(&r, p.port, TLS1_2_VERSION), 0);
  CU_ASSERT_EQUAL(raw_echo(&r, "ping"), 0);
  CU_ASSERT_EQUAL(SSL_renegotiate(r.ssl), 1);
  int hs = SSL_do_handshake(r.ssl);
  /* Refused: the handshake fails, or the server's no_renegotiation
   * alert ends the connection at the next read. */
  char buf[16];
  int k = hs == 1 ? SSL_read(r.ssl, buf, sizeof buf) : -1;
  CU_ASSERT(hs != 1 || k <= 0);
  CU_ASSERT_EQUAL(SSL_renegotiate_pending(r.ssl) && hs == 1 && k > 0, 0);
  unsigned long e = ERR_peek_error();
  raw_free(&r);
  CU_ASSERT(tls_wait_count(&p.v.closed, 1, 10000));
  CU_ASSERT(atomic_load(&p.v.last_close) != 0);
  pthread_mutex_lock(&p.v.lock);
  printf("(client: handshake %d, read %d, \"%s\"; server: %s \"%s\") ", hs, k,
         e ? ERR_reason_error_string(e) : "",
         taxi_error_name(atomic_load(&p.v.last_close)), p.v.why);
  pthread_mutex_unlock(&p.v.lock);
  peer_srv_stop(&p);
}

static void test_garbage(void) {
  peer_srv_t p;
  if (peer_srv_start(&p) < 0) return;
  /* A ClientHello made through memory BIOs, sent with garbage after it. */
  SSL_CTX *x = SSL_CTX_new(TLS_client_method());
  SSL *ssl = SSL_new(x);
  BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  CU_ASSERT(SSL_connect(ssl) <= 0); /* waits for the ServerHello */
  char hello[4096], junk[512];
  int n = BIO_read(out, hello, sizeof hello);
  CU_ASSERT_FATAL(n > 0);
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)st_byte(11, i);
  int fd = st_connect(p.port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_send_all(fd, hello, (size_t)n), 0);
  CU_ASSERT_EQUAL(net_send_all(fd, junk, sizeof junk), 0);
  char buf[8192];
  CU_ASSERT(st_recv_to_eof(fd, buf, sizeof buf) >= 0);
  close(fd);
  CU_ASSERT(tls_wait_count(&p.v.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&p.v.last_close), TAXI_ETLS);
  CU_ASSERT_EQUAL(atomic_load(&p.v.hs_failed), 1);
  pthread_mutex_lock(&p.v.lock);
  printf("(server: \"%s\") ", p.v.why);
  pthread_mutex_unlock(&p.v.lock);
  SSL_free(ssl);
  SSL_CTX_free(x);
  /* The listener goes on. */
  raw_t r;
  CU_ASSERT_EQUAL(raw_connect(&r, p.port, 0), 0);
  CU_ASSERT_EQUAL(raw_echo(&r, "still here"), 0);
  raw_free(&r);
  peer_srv_stop(&p);
}

CU_TestInfo tls_tests_peers[] = {
    {"openssl s_client to a taxi server: echo, ALPN, SNI", test_s_client},
    {"a TLS 1.0 client: refused, TAXI_ETLS", test_tls10_client},
    {"a taxi client to openssl s_server; truncation", test_s_server},
    {"close_notify both ways", test_close_notify},
    {"a peer gone without close_notify: TAXI_ETRUNCATED", test_truncated},
    {"renegotiation refused", test_renegotiation},
    {"garbage after a ClientHello: TAXI_ETLS", test_garbage},
    CU_TEST_INFO_NULL};
