/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/resolve.c - host names: taxi_resolve and taxi_stream_connect
 * to "host:port", over the pair under test.  The system's resolver for
 * "localhost"; a hosts table of the test's own (the context's
 * resolve_hook) for the rest: names that do not exist, names that never
 * answer (timeouts, cancelling, taxi_io_destroy while they are pending),
 * and a name whose IPv6 address is black-holed, so that the connect must
 * fall back to its IPv4 one after the attempt delay (RFC 8305).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the test's hosts table (runs in the resolver threads) --------------- */

static struct {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int release; /* slow.test answers (TAXI_ETRYAGAIN) */
  atomic_int entered, returned;
  char dual_v6[64], dual_v4[64]; /* dual.test's addresses */
  char dead_v6[64], dead_v4[64]; /* dead.test's: nothing listens */
} H = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int one(taxi_addr_t *out, const char *text) {
  return taxi_addr_parse(out, text) == 0 ? 1 : TAXI_ESYS;
}

static int hosts_hook(const char *host, const char *port, int family,
                      taxi_addr_t *out, size_t max, void *arg) {
  (void)family;
  (void)arg;
  (void)port;
  atomic_fetch_add(&H.entered, 1);
  int rc = TAXI_ENONAME;
  if (max < 2) {
    rc = TAXI_ESYS;
  } else if (strcmp(host, "alpha.test") == 0) {
    rc = one(out, "127.0.0.1:0");
  } else if (strcmp(host, "dual.test") == 0) {
    /* IPv4 first: the order to try puts IPv6 first all the same. */
    rc = one(&out[0], H.dual_v4) > 0 && one(&out[1], H.dual_v6) > 0 ? 2 : -1;
  } else if (strcmp(host, "dead.test") == 0) {
    rc = one(&out[0], H.dead_v6) > 0 && one(&out[1], H.dead_v4) > 0 ? 2 : -1;
  } else if (strcmp(host, "hole.test") == 0) {
    rc = one(out, H.dual_v6);
  } else if (strcmp(host, "v4only.test") == 0) {
    rc = one(out, "127.0.0.1:0");
  } else if (strcmp(host, "slow.test") == 0) {
    /* Answers once the test lets it (bounded, so that a failed test
     * does not leave the thread for good). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&H.m);
    while (!H.release && pthread_cond_timedwait(&H.cv, &H.m, &until) == 0) {
    }
    pthread_mutex_unlock(&H.m);
    rc = TAXI_ETRYAGAIN;
  }
  atomic_fetch_add(&H.returned, 1);
  return rc;
}

static void hosts_hold(void) {
  pthread_mutex_lock(&H.m);
  H.release = 0;
  pthread_mutex_unlock(&H.m);
}

static int hooks_idle(void *arg) {
  (void)arg;
  return atomic_load(&H.entered) == atomic_load(&H.returned);
}

/* Let slow.test answer, and wait until no call of the hook is left. */
static void hosts_release(void) {
  pthread_mutex_lock(&H.m);
  H.release = 1;
  pthread_cond_broadcast(&H.cv);
  pthread_mutex_unlock(&H.m);
  CU_ASSERT(st_wait(hooks_idle, NULL, 10000));
}

static int io_with_hosts(st_io_t *c, unsigned threads, unsigned queue) {
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.resolve_hook = hosts_hook;
  o.resolve_threads = threads;
  o.resolve_queue = queue;
  hosts_hold();
  return st_io_create_with(c, &o);
}

/* ---- what the callbacks saw ---------------------------------------------- */

struct res {
  atomic_int calls;
  int status;
  size_t n;
  taxi_addr_t addrs[TAXI_RESOLVE_MAX];
};

static void on_res(taxi_resolve_t *r, int status, const taxi_addr_t *addrs,
                   size_t n, void *arg) {
  struct res *x = arg;
  (void)r;
  x->status = status;
  x->n = n;
  if (status == 0) {
    CU_ASSERT(n >= 1 && n <= TAXI_RESOLVE_MAX && addrs != NULL);
    memcpy(x->addrs, addrs, n * sizeof *addrs);
  } else {
    CU_ASSERT(n == 0 && addrs == NULL);
  }
  atomic_fetch_add(&x->calls, 1);
}

/* Resolve text and wait for the callback; returns its status. */
static int resolve_wait(st_io_t *c, const char *text,
                        const taxi_resolve_options_t *o, struct res *x) {
  memset(x, 0, sizeof *x);
  int rc = taxi_resolve(NULL, c->io, text, o, on_res, x);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) return rc;
  CU_ASSERT(util_wait_flag(&x->calls, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&x->calls), 1);
  return x->status;
}

static int addr_is(const taxi_addr_t *a, const char *text) {
  char buf[TAXI_ADDR_STRLEN];
  return taxi_addr_format(a, buf, sizeof buf) > 0 && strcmp(buf, text) == 0;
}

/* A client over a connect to a name: sends "ping", reads the echo. */
struct client {
  atomic_int connect_calls, closes, got;
  int status, reason;
  taxi_addr_t peer;
  taxi_addr_t tried[TAXI_RESOLVE_MAX];
  atomic_int ntried;
  char buf[8];
  size_t len;
};

static void cl_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct client *k = taxi_stream_data(s);
  if (status < 0) return;
  if (k->len + len <= sizeof k->buf) {
    memcpy(k->buf + k->len, data, len);
    k->len += len;
  }
  if (k->len >= 4) {
    atomic_store(&k->got, 1);
    taxi_stream_close(s);
  }
}

static void cl_closed(taxi_stream_t *s, int reason) {
  struct client *k = taxi_stream_data(s);
  k->reason = reason;
  atomic_fetch_add(&k->closes, 1);
}

static void cl_connected(taxi_stream_t *s, int status, void *arg) {
  struct client *k = arg;
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, cl_closed), 0);
  k->status = status;
  if (status == 0) {
    CU_ASSERT_EQUAL(taxi_stream_peer(s, &k->peer), 0);
    CU_ASSERT(taxi_stream_handle(s) != TAXI_INVALID_HANDLE);
    CU_ASSERT_EQUAL(taxi_stream_read_start(s, cl_read), 0);
  }
  atomic_fetch_add(&k->connect_calls, 1);
}

static void cl_attempt(taxi_stream_t *s, const taxi_addr_t *a) {
  struct client *k = taxi_stream_data(s);
  int i = atomic_load(&k->ntried);
  if (i < TAXI_RESOLVE_MAX) k->tried[i] = *a;
  atomic_fetch_add(&k->ntried, 1);
}

/* Connect to text with o (NULL: defaults plus cl_attempt); wait for the
 * close.  With `write`, "ping" is queued before the connect is over (only
 * where it cannot fail first: a failed connect releases the stream). */
static void client_run(st_io_t *c, const char *text, taxi_stream_options_t *o,
                       struct client *k, int write) {
  taxi_stream_options_t d;
  memset(k, 0, sizeof *k);
  if (!o) {
    taxi_stream_options_init(&d);
    o = &d;
  }
  o->on_attempt = cl_attempt;
  taxi_stream_t *s;
  int rc = taxi_stream_connect(&s, c->io, text, o, cl_connected, k);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) return;
  if (write) CU_ASSERT_EQUAL(taxi_stream_write(s, "ping", 4, NULL, NULL), 0);
  CU_ASSERT(util_wait_flag(&k->closes, 1, 15000));
  CU_ASSERT_EQUAL(atomic_load(&k->connect_calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&k->closes), 1);
}

/* ---- the tests ----------------------------------------------------------- */

/* The system's resolver: localhost's addresses, a numeric address (no
 * thread needed, same callback), and a connect to localhost. */
static void test_resolve_localhost(void) {
  st_io_t c;
  struct res x;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  CU_ASSERT_EQUAL(resolve_wait(&c, "localhost:8080", NULL, &x), 0);
  for (size_t i = 0; i < x.n; i++) {
    CU_ASSERT(x.addrs[i].family == TAXI_ADDR_IPV4 ||
              x.addrs[i].family == TAXI_ADDR_IPV6);
    CU_ASSERT_EQUAL(taxi_addr_port(&x.addrs[i]), 8080);
  }
  /* Interleaved, IPv6 first: never two IPv4 before an IPv6. */
  if (x.n >= 2 && x.addrs[0].family == TAXI_ADDR_IPV4)
    for (size_t i = 1; i < x.n; i++)
      CU_ASSERT_EQUAL(x.addrs[i].family, TAXI_ADDR_IPV4);
  taxi_resolve_options_t ro;
  taxi_resolve_options_init(&ro);
  ro.family = TAXI_ADDR_IPV4;
  CU_ASSERT_EQUAL(resolve_wait(&c, "localhost:80", &ro, &x), 0);
  for (size_t i = 0; i < x.n; i++)
    CU_ASSERT_EQUAL(x.addrs[i].family, TAXI_ADDR_IPV4);
  CU_ASSERT_EQUAL(resolve_wait(&c, "127.0.0.1:9", NULL, &x), 0);
  CU_ASSERT(x.n == 1 && addr_is(&x.addrs[0], "127.0.0.1:9"));
  CU_ASSERT_EQUAL(resolve_wait(&c, "[::1]:9", NULL, &x), 0);
  CU_ASSERT(x.n == 1 && addr_is(&x.addrs[0], "[::1]:9"));
  ro.family = TAXI_ADDR_IPV6;
  CU_ASSERT_EQUAL(resolve_wait(&c, "127.0.0.1:9", &ro, &x), TAXI_ENOADDR);

  static st_echo_t echo;
  memset(&echo, 0, sizeof echo);
  taxi_listener_t *l;
  int port = st_listen(&c, NULL, st_echo_accept, &echo, &l);
  CU_ASSERT_FATAL(port > 0);
  static struct client k;
  char text[64], want[64];
  snprintf(text, sizeof text, "localhost:%d", port);
  snprintf(want, sizeof want, "127.0.0.1:%d", port);
  client_run(&c, text, NULL, &k, 1);
  CU_ASSERT_EQUAL(k.status, 0);
  CU_ASSERT_EQUAL(atomic_load(&k.got), 1);
  CU_ASSERT(k.len == 4 && memcmp(k.buf, "ping", 4) == 0);
  CU_ASSERT(addr_is(&k.peer, want));
  CU_ASSERT(atomic_load(&k.ntried) >= 1);
  st_io_destroy(&c);
}

/* Names from the test's table, through the context's hook. */
static void test_resolve_hosts_table(void) {
  st_io_t c;
  struct res x;
  if (io_with_hosts(&c, 0, 0) < 0) return;
  st_io_run(&c);
  CU_ASSERT_EQUAL(resolve_wait(&c, "alpha.test:5", NULL, &x), 0);
  CU_ASSERT(x.n == 1 && addr_is(&x.addrs[0], "127.0.0.1:5"));
  taxi_resolve_options_t ro;
  taxi_resolve_options_init(&ro);
  ro.family = TAXI_ADDR_IPV6;
  CU_ASSERT_EQUAL(resolve_wait(&c, "v4only.test:5", &ro, &x), TAXI_ENOADDR);

  static st_echo_t echo;
  memset(&echo, 0, sizeof echo);
  taxi_listener_t *l;
  int port = st_listen(&c, NULL, st_echo_accept, &echo, &l);
  CU_ASSERT_FATAL(port > 0);
  static struct client k;
  char text[64], want[64];
  snprintf(text, sizeof text, "alpha.test:%d", port);
  snprintf(want, sizeof want, "127.0.0.1:%d", port);
  client_run(&c, text, NULL, &k, 1);
  CU_ASSERT_EQUAL(k.status, 0);
  CU_ASSERT_EQUAL(atomic_load(&k.got), 1);
  CU_ASSERT(addr_is(&k.peer, want));
  CU_ASSERT_EQUAL(atomic_load(&k.ntried), 1);
  CU_ASSERT(addr_is(&k.tried[0], want));
  /* One connect, counted once: the attempts are not the application's. */
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.connects, 1);
  CU_ASSERT_EQUAL(st.connect_errors, 0);
  CU_ASSERT_EQUAL(st.timers, 0);
  st_io_destroy(&c);
}

/* A name that does not exist: its own code, to taxi_resolve and to the
 * connect callback (and the close callback). */
static void test_resolve_no_such_name(void) {
  st_io_t c;
  struct res x;
  if (io_with_hosts(&c, 0, 0) < 0) return;
  st_io_run(&c);
  CU_ASSERT_EQUAL(resolve_wait(&c, "gone.test:80", NULL, &x), TAXI_ENONAME);
  static struct client k;
  client_run(&c, "gone.test:80", NULL, &k, 0);
  CU_ASSERT_EQUAL(k.status, TAXI_ENONAME);
  CU_ASSERT_EQUAL(k.reason, TAXI_ENONAME);
  CU_ASSERT_EQUAL(atomic_load(&k.ntried), 0);
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.connect_errors, 1);
  CU_ASSERT_EQUAL(st.streams_opened, st.streams_closed);
  st_io_destroy(&c);
}

/* A resolver that does not answer: the timeout of taxi_resolve, the
 * connect timeout (which covers the resolution), and cancelling both. */
static void test_resolve_never_answers(void) {
  st_io_t c;
  struct res x;
  if (io_with_hosts(&c, 0, 0) < 0) return;
  st_io_run(&c);
  taxi_resolve_options_t ro;
  taxi_resolve_options_init(&ro);
  ro.timeout = 50 * TAXI_NSEC_PER_MSEC;
  CU_ASSERT_EQUAL(resolve_wait(&c, "slow.test:80", &ro, &x), TAXI_ETIMEDOUT);

  static struct res y;
  memset(&y, 0, sizeof y);
  taxi_resolve_t *r;
  CU_ASSERT_EQUAL_FATAL(
      taxi_resolve(&r, c.io, "slow.test:80", NULL, on_res, &y), 0);
  CU_ASSERT_EQUAL(taxi_resolve_cancel(r), 0);
  CU_ASSERT(util_wait_flag(&y.calls, 1, 10000));
  CU_ASSERT_EQUAL(y.status, TAXI_ECANCELED);

  static struct client k;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.connect_timeout = 100 * TAXI_NSEC_PER_MSEC;
  client_run(&c, "slow.test:80", &so, &k, 0);
  CU_ASSERT_EQUAL(k.status, TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(k.reason, TAXI_ETIMEDOUT);

  /* Closed while resolving: the connect is cancelled. */
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  CU_ASSERT_EQUAL_FATAL(
      taxi_stream_connect(&s, c.io, "slow.test:80", NULL, cl_connected, &k), 0);
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  CU_ASSERT(util_wait_flag(&k.connect_calls, 1, 10000));
  CU_ASSERT_EQUAL(k.status, TAXI_ECANCELED);
  /* Still once each, after the answers came. */
  hosts_release();
  CU_ASSERT_EQUAL(atomic_load(&x.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&y.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&k.connect_calls), 1);
  st_io_destroy(&c);
}

/* A listener on [::1]:0 whose backlog is full (see connect.c): an attempt
 * to it neither connects nor fails.  -1 where IPv6 is missing. */
static int v6_blackhole(int *port, int fds[4]) {
  int l = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (l < 0) return -1;
  if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 0) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &len) != 0) {
    close(l);
    return -1;
  }
  *port = ntohs(a.sin6_port);
  for (int i = 0; i < 4; i++) {
    fds[i] = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fds[i] >= 0) (void)connect(fds[i], (struct sockaddr *)&a, sizeof a);
  }
  return l;
}

/* IPv6 answered first and black-holed: the IPv4 address is tried after
 * the attempt delay while the IPv6 one is still pending, and wins.  The
 * order of the attempts is asserted, not the time.  Then every address
 * refused, and a destroy while an attempt is pending. */
static void test_happy_eyeballs_fallback(void) {
  st_io_t c;
  /* The ports that refuse are held until the end: a port bound and closed
   * again could be taken by a test running beside this one. */
  int fds[4] = {-1, -1, -1, -1}, p6 = 1, d6 = 1, d4 = 1;
  int hole = v6_blackhole(&p6, fds);
  int dead6 = net_refusing_port(AF_INET6, &d6);
  int dead4 = net_refusing_port(AF_INET, &d4);
  CU_ASSERT(dead4 >= 0);
  if (hole < 0)
    printf("\n    no IPv6 here: its attempt fails at once instead ");
  if (io_with_hosts(&c, 0, 0) < 0) return;
  st_io_run(&c);
  static st_echo_t echo;
  memset(&echo, 0, sizeof echo);
  taxi_listener_t *l;
  int port = st_listen(&c, NULL, st_echo_accept, &echo, &l);
  CU_ASSERT_FATAL(port > 0);
  snprintf(H.dual_v6, sizeof H.dual_v6, "[::1]:%d", p6);
  snprintf(H.dual_v4, sizeof H.dual_v4, "127.0.0.1:%d", port);
  static struct client k;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.attempt_delay = 10 * TAXI_NSEC_PER_MSEC;
  client_run(&c, "dual.test:7", &so, &k, 1);
  CU_ASSERT_EQUAL(k.status, 0);
  CU_ASSERT_EQUAL(atomic_load(&k.got), 1);
  CU_ASSERT_EQUAL(atomic_load(&k.ntried), 2);
  CU_ASSERT(addr_is(&k.tried[0], H.dual_v6));
  CU_ASSERT(addr_is(&k.tried[1], H.dual_v4));
  CU_ASSERT(addr_is(&k.peer, H.dual_v4));

  /* Every address refused: the last error. */
  snprintf(H.dead_v6, sizeof H.dead_v6, "[::1]:%d", d6);
  snprintf(H.dead_v4, sizeof H.dead_v4, "127.0.0.1:%d", d4);
  client_run(&c, "dead.test:7", &so, &k, 0);
  CU_ASSERT_EQUAL(k.status, TAXI_ECONNREFUSED);
  CU_ASSERT_EQUAL(atomic_load(&k.ntried), 2);
  CU_ASSERT(addr_is(&k.tried[0], H.dead_v6));

  /* Destroyed while an attempt is pending: cancelled, each callback once. */
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  CU_ASSERT_EQUAL_FATAL(
      taxi_stream_connect(&s, c.io, "hole.test:7", &so, cl_connected, &k), 0);
  CU_ASSERT(util_wait_flag(&k.ntried, 1, 10000));
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&k.connect_calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&k.closes), 1);
  if (hole >= 0) CU_ASSERT_EQUAL(k.status, TAXI_ECANCELED);
  for (int i = 0; i < 4; i++)
    if (fds[i] >= 0) close(fds[i]);
  if (hole >= 0) close(hole);
  if (dead6 >= 0) close(dead6);
  if (dead4 >= 0) close(dead4);
}

/* Threads of this process, from /proc (-1 where there is none). */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[128];
  int n = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

static int threads_back_to(void *arg) { return thread_count() <= *(int *)arg; }

/* taxi_io_destroy with names pending: each callback once, with
 * TAXI_ECANCELED; the resolver threads, still in the hook, drop their
 * answers and leave once it returns. */
static void test_resolve_destroy_pending(void) {
  st_io_t c;
  int before = thread_count();
  if (io_with_hosts(&c, 2, 0) < 0) return;
  st_io_run(&c);
  static struct res x[3];
  memset(x, 0, sizeof x);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(
        taxi_resolve(NULL, c.io, "slow.test:80", NULL, on_res, &x[i]), 0);
  static struct client k;
  memset(&k, 0, sizeof k);
  taxi_stream_t *s;
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&s, c.io, "slow.test:80", NULL, cl_connected, &k), 0);
  st_io_destroy(&c);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(atomic_load(&x[i].calls), 1);
    CU_ASSERT_EQUAL(x[i].status, TAXI_ECANCELED);
  }
  CU_ASSERT_EQUAL(atomic_load(&k.connect_calls), 1);
  CU_ASSERT_EQUAL(k.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(atomic_load(&k.closes), 1);
  hosts_release();
  if (before > 0) CU_ASSERT(st_wait(threads_back_to, &before, 10000));
}

/* Bad input, each with its code (and a detail naming the call). */
static void test_resolve_bad_input(void) {
  st_io_t c;
  if (io_with_hosts(&c, 1, 1) < 0) return;
  st_io_run(&c);
  struct res x;
  memset(&x, 0, sizeof x);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, NULL, "a.test:1", NULL, on_res, &x),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, NULL, NULL, on_res, &x),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "a.test:1", NULL, NULL, &x),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_resolve_cancel(NULL), TAXI_EINVAL);
  char longname[TAXI_RESOLVE_NAME_MAX + 16];
  memset(longname, 'a', TAXI_RESOLVE_NAME_MAX + 1);
  strcpy(longname + TAXI_RESOLVE_NAME_MAX + 1, ":80");
  const char *bad[] = {"",
                       "a.test",
                       "a.test:",
                       ":80",
                       "a.test:x",
                       "a.test:65536",
                       "a.test:99999999999",
                       "::1:80",
                       "[a.test]:80",
                       "bad host:80",
                       "unix:/x",
                       longname};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = taxi_resolve(NULL, c.io, bad[i], NULL, on_res, &x);
    if (rc != TAXI_EBADADDR) printf("\n    \"%.20s\": %d ", bad[i], rc);
    CU_ASSERT_EQUAL(rc, TAXI_EBADADDR);
    CU_ASSERT(strncmp(taxi_error_detail(), "taxi_resolve: ", 14) == 0);
    /* ":80" and "unix:/x" are addresses a connect takes as they are. */
    if (i == 3 || i == 10) continue;
    taxi_stream_t *s;
    rc = taxi_stream_connect(&s, c.io, bad[i], NULL, cl_connected, NULL);
    if (rc != TAXI_EBADADDR) printf("\n    connect \"%.20s\": %d ", bad[i], rc);
    CU_ASSERT_EQUAL(rc, TAXI_EBADADDR);
  }
  taxi_resolve_options_t ro;
  taxi_resolve_options_init(&ro);
  ro.family = 7;
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "a.test:1", &ro, on_res, &x),
                  TAXI_EINVAL);
  ro.family = 0;
  ro.timeout = -1;
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "a.test:1", &ro, on_res, &x),
                  TAXI_EINVAL);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.attempt_delay = TAXI_NSEC_PER_MSEC;
  taxi_stream_t *s;
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&s, c.io, "a.test:1", &so, cl_connected, NULL),
      TAXI_EINVAL);
  so.attempt_delay = 3 * TAXI_NSEC_PER_SEC;
  CU_ASSERT_EQUAL(
      taxi_stream_connect(&s, c.io, "a.test:1", &so, cl_connected, NULL),
      TAXI_EINVAL);
  taxi_io_options_t io_o;
  taxi_io_options_init(&io_o);
  io_o.resolve_threads = 65;
  taxi_io_t *other;
  CU_ASSERT_EQUAL(taxi_io_create(&other, &io_o), TAXI_EINVAL);

  /* One thread, one place in the queue: the third name is refused. */
  static struct res q[3];
  memset(q, 0, sizeof q);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "slow.test:1", NULL, on_res, &q[0]),
                  0);
  CU_ASSERT(util_wait_flag(&H.entered, atomic_load(&H.returned) + 1, 10000));
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "slow.test:1", NULL, on_res, &q[1]),
                  0);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "slow.test:1", NULL, on_res, &q[2]),
                  TAXI_ENOBUFS);
  CU_ASSERT(strstr(taxi_error_detail(), "resolve_queue") != NULL);
  hosts_release();
  CU_ASSERT(util_wait_flag(&q[1].calls, 1, 10000));
  CU_ASSERT_EQUAL(q[0].status, TAXI_ETRYAGAIN);
  CU_ASSERT_EQUAL(q[1].status, TAXI_ETRYAGAIN);
  CU_ASSERT_EQUAL(atomic_load(&q[2].calls), 0);
  /* A stopped context takes no more. */
  CU_ASSERT_EQUAL(st_io_stop(&c), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_resolve(NULL, c.io, "alpha.test:1", NULL, on_res, &x),
                  TAXI_ESTOPPED);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_resolve[] = {
    {"resolve localhost, and connect to it", test_resolve_localhost},
    {"resolve from a hosts table (hook), and connect",
     test_resolve_hosts_table},
    {"resolve a name that does not exist", test_resolve_no_such_name},
    {"resolver never answers: timeout, cancel", test_resolve_never_answers},
    {"connect: IPv6 black-holed, IPv4 wins (RFC 8305)",
     test_happy_eyeballs_fallback},
    {"destroy with resolutions pending", test_resolve_destroy_pending},
    {"resolve: bad input", test_resolve_bad_input},
    CU_TEST_INFO_NULL,
};
