/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_apr.c - taxi/apr.h: APR sockets and files registered with a
 * reactor, taxi objects whose life an apr_pool_t decides (including a pool
 * destroyed while a Leader/Followers pool's threads run), error codes in
 * both directions, and the bad input the header promises to refuse.
 */
#define _GNU_SOURCE 1

#include "runner.h"
#include "util.h"

#include "taxi/apr.h"

#include <apr_general.h>
#include <apr_portable.h>
#include <apr_strings.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 10000

/* ---- a connection handler that reads through APR ------------------------ */

typedef struct apr_conn {
  taxi_handler_t h;
  apr_socket_t *sock; /* NULL for a pipe */
  apr_file_t *file;   /* NULL for a socket */
  int echo;           /* send back what was read */
  atomic_int inputs;
  atomic_long bytes;
  atomic_int closes;
  atomic_int close_fd_valid; /* the socket still had its descriptor */
} apr_conn_t;

#define CONN(hp) TAXI_CONTAINER_OF(hp, apr_conn_t, h)

static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  apr_conn_t *c = CONN(h);
  char buf[512];
  (void)fd;
  (void)ev;
  atomic_fetch_add(&c->inputs, 1);
  for (;;) {
    apr_size_t n = sizeof buf;
    apr_status_t st = c->sock ? apr_socket_recv(c->sock, buf, &n)
                              : apr_file_read(c->file, buf, &n);
    if (n > 0) {
      atomic_fetch_add(&c->bytes, (long)n);
      if (c->echo && c->sock) {
        apr_size_t off = 0;
        while (off < n) {
          apr_size_t m = n - off;
          apr_status_t ws = apr_socket_send(c->sock, buf + off, &m);
          off += m;
          if (ws != APR_SUCCESS && !APR_STATUS_IS_EAGAIN(ws)) return -1;
        }
      }
    }
    if (APR_STATUS_IS_EAGAIN(st)) return 0;
    if (APR_STATUS_IS_EOF(st)) return -1;
    if (st != APR_SUCCESS) return -1;
  }
}

static void conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  apr_conn_t *c = CONN(h);
  taxi_handle_t now = -1;
  if (c->sock && taxi_apr_socket_handle(&now, c->sock) == 0 && now == fd)
    atomic_store(&c->close_fd_valid, 1);
  atomic_fetch_add(&c->closes, 1);
}

static const taxi_handler_ops_t conn_ops = {.input = conn_input,
                                            .close = conn_close};

static void conn_init(apr_conn_t *c) {
  memset(c, 0, sizeof *c);
  taxi_handler_init(&c->h, &conn_ops);
}

/* A POSIX socket pair whose first end is wrapped as an APR socket (with a
 * timeout of 0: non-blocking, as the header asks). */
static apr_socket_t *wrapped_pair(apr_pool_t *pool, int sv[2]) {
  apr_socket_t *s = NULL;
  apr_os_sock_t fd;
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  fd = sv[0];
  CU_ASSERT_EQUAL_FATAL(apr_os_sock_put(&s, &fd, pool), APR_SUCCESS);
  CU_ASSERT_EQUAL(apr_socket_timeout_set(s, 0), APR_SUCCESS);
  return s;
}

static int pred_nonzero(void *arg) { return atomic_load((atomic_int *)arg); }

static int wait_for(taxi_reactor_t *r, int (*pred)(void *), void *arg,
                    int max_ms) {
  taxi_time_t start = taxi_now();
  while (!pred(arg)) {
    if (util_elapsed_ms(start) > max_ms) return 0;
    if (taxi_reactor_handle_events(r, 50) < 0) return 0;
  }
  return 1;
}

static apr_pool_t *new_pool(void) {
  apr_pool_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(apr_pool_create(&p, NULL), APR_SUCCESS);
  return p;
}

/* ---- handles --------------------------------------------------------- */

static void test_register_socket(void) {
  apr_pool_t *pool = new_pool();
  int sv[2];
  apr_socket_t *s = wrapped_pair(pool, sv);
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "apr"), 0);
  apr_conn_t c;
  conn_init(&c);
  c.sock = s;
  taxi_handle_t fd = -1;
  CU_ASSERT_EQUAL(taxi_apr_socket_handle(&fd, s), 0);
  CU_ASSERT_EQUAL(fd, sv[0]);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, s, &c.h, TAXI_EV_READ), 0);
  /* Registered under its native handle: a second time is EEXIST. */
  apr_conn_t d;
  conn_init(&d);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &d.h, TAXI_EV_READ),
                  TAXI_EEXIST);
  CU_ASSERT_EQUAL(write(sv[1], "hello", 5), 5);
  CU_ASSERT_EQUAL(wait_for(r, pred_nonzero, &c.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&c.bytes), 5);
  /* EOF: the hook returns -1 and the handler is closed, socket intact. */
  close(sv[1]);
  CU_ASSERT_EQUAL(wait_for(r, pred_nonzero, &c.closes, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&c.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c.close_fd_valid), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(apr_socket_close(s), APR_SUCCESS);
  apr_pool_destroy(pool);
}

static void test_register_file(void) {
  apr_pool_t *pool = new_pool();
  apr_file_t *rd, *wr;
  CU_ASSERT_EQUAL_FATAL(apr_file_pipe_create(&rd, &wr, pool), APR_SUCCESS);
  CU_ASSERT_EQUAL(apr_file_pipe_timeout_set(rd, 0), APR_SUCCESS);
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "apr:poll"), 0);
  apr_conn_t c;
  conn_init(&c);
  c.file = rd;
  CU_ASSERT_EQUAL(taxi_apr_register_file(r, rd, &c.h, TAXI_EV_READ), 0);
  apr_size_t n = 3;
  CU_ASSERT_EQUAL(apr_file_write(wr, "abc", &n), APR_SUCCESS);
  CU_ASSERT_EQUAL(wait_for(r, pred_nonzero, &c.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&c.bytes), 3);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &c.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&c.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  apr_pool_destroy(pool); /* closes both ends: APR owns them */
}

/* An APR socket or file without an OS handle, and NULLs: clear errors,
 * nothing registered. */
static void test_handles_bad_input(void) {
  apr_pool_t *pool = new_pool();
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "apr"), 0);
  apr_conn_t c;
  conn_init(&c);
  taxi_handle_t fd;

  apr_socket_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(
      apr_socket_create(&s, APR_INET, SOCK_STREAM, APR_PROTO_TCP, pool),
      APR_SUCCESS);
  CU_ASSERT_EQUAL(apr_socket_close(s), APR_SUCCESS); /* no descriptor now */
  CU_ASSERT_EQUAL(taxi_apr_socket_handle(&fd, s), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, s, &c.h, TAXI_EV_READ),
                  TAXI_EBADF);
  /* One put together from an invalid descriptor. */
  apr_socket_t *none = NULL;
  apr_os_sock_t minus = -1;
  CU_ASSERT_EQUAL(apr_os_sock_put(&none, &minus, pool), APR_SUCCESS);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, none, &c.h, TAXI_EV_READ),
                  TAXI_EBADF);

  apr_file_t *rd, *wr;
  CU_ASSERT_EQUAL_FATAL(apr_file_pipe_create(&rd, &wr, pool), APR_SUCCESS);
  CU_ASSERT_EQUAL(apr_file_close(rd), APR_SUCCESS);
  CU_ASSERT_EQUAL(taxi_apr_file_handle(&fd, rd), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_apr_register_file(r, rd, &c.h, TAXI_EV_READ),
                  TAXI_EBADF);

  CU_ASSERT_EQUAL(taxi_apr_socket_handle(NULL, s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_socket_handle(&fd, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_file_handle(&fd, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, NULL, &c.h, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_register_file(r, NULL, &c.h, TAXI_EV_READ),
                  TAXI_EINVAL);

  /* The handler was never attached, and can still be used. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &c.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&c.closes), 0);
  int sv[2];
  c.sock = wrapped_pair(pool, sv);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, c.sock, &c.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(wait_for(r, pred_nonzero, &c.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&c.closes), 1);
  close(sv[0]);
  close(sv[1]);
  apr_pool_destroy(pool);
}

/* "apr:" names: the ones APR has here work, an unknown one is refused, and
 * the capabilities never claim what APR's pollset cannot promise. */
static void test_backend_names(void) {
  static const char *const unknown[] = {
      "apr:", "apr:nosuch", "apr:EPOLL", "apr:poll:poll", "aprx", "apr "};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    taxi_reactor_t *r = NULL;
    int rc = util_reactor_create(&r, unknown[i]);
    if (rc != TAXI_ENOBACKEND) printf("\n    \"%s\": %d ", unknown[i], rc);
    CU_ASSERT_EQUAL(rc, TAXI_ENOBACKEND);
    CU_ASSERT_PTR_NULL(r);
  }
  int seen_apr = 0, seen_poll = 0, seen_select = 0;
  for (size_t i = 0; i < taxi_backend_count(); i++) {
    taxi_backend_info_t info;
    CU_ASSERT_EQUAL_FATAL(taxi_backend_info(&info, i), 0);
    if (strncmp(info.name, "apr", 3) != 0) continue;
    CU_ASSERT_EQUAL(info.caps & (TAXI_CAP_ONESHOT | TAXI_CAP_MULTI_WAIT |
                                 TAXI_CAP_LIVE_UPDATE | TAXI_CAP_EDGE),
                    0);
    taxi_reactor_t *r = NULL;
    int rc = util_reactor_create(&r, info.name);
    if (info.available) {
      CU_ASSERT_EQUAL(rc, 0);
      if (rc == 0) {
        CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), info.name);
        /* No several leaders without a concurrent handle set. */
        taxi_lf_pool_t *lf = NULL;
        taxi_lf_options_t o = {.size = sizeof(taxi_lf_options_t),
                               .leaders = TAXI_LEADERS_MANY};
        CU_ASSERT_EQUAL(taxi_lf_create(&lf, r, &o), TAXI_ENOTSUP);
        CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
      }
    } else {
      /* A method this APR lacks here (kqueue, port on Linux). */
      CU_ASSERT_EQUAL(rc, TAXI_ENOBACKEND);
    }
    if (strcmp(info.name, "apr") == 0) seen_apr = info.available;
    if (strcmp(info.name, "apr:poll") == 0) seen_poll = info.available;
    if (strcmp(info.name, "apr:select") == 0) seen_select = info.available;
  }
  CU_ASSERT(seen_apr && seen_poll && seen_select);
}

/* ---- lifetime tied to a pool --------------------------------------------- */

static void test_reactor_bound(void) {
  apr_pool_t *pool = new_pool();
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, NULL), 0);
  int sv[2];
  apr_conn_t c;
  conn_init(&c);
  c.sock = wrapped_pair(pool, sv);
  CU_ASSERT_EQUAL(taxi_apr_register_socket(r, c.sock, &c.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, pool), TAXI_EEXIST);
  apr_pool_destroy(pool);
  /* The reactor went with the pool, closing its handler once. */
  CU_ASSERT_EQUAL(atomic_load(&c.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c.close_fd_valid), 1);
  close(sv[0]);
  close(sv[1]);

  /* Unbound, the reactor outlives the pool. */
  pool = new_pool();
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_create(&r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_unbind(r, pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_unbind(r, pool), TAXI_ENOENT);
  apr_pool_destroy(pool);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);

  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(NULL, pool), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_reactor_unbind(NULL, NULL), TAXI_EINVAL);
}

enum { LF_CONNS = 8, LF_THREADS = 3 };

typedef struct lf_fixture {
  apr_pool_t *pool;
  taxi_reactor_t *r;
  taxi_lf_pool_t *lf;
  apr_conn_t conns[LF_CONNS];
  int peer[LF_CONNS];
  int mine[LF_CONNS];   /* the ends wrapped as APR sockets */
  atomic_int joined_rc; /* what taxi_lf_join() returned, +1000 */
} lf_fixture_t;

static void *joiner(void *arg) {
  lf_fixture_t *f = arg;
  int rc = taxi_lf_join(f->lf, -1, 0);
  atomic_store(&f->joined_rc, rc + 1000);
  return NULL;
}

/* One echo round trip on every connection; 1 if all came back. */
static int echo_round(lf_fixture_t *f, int round) {
  char msg[16], got[16];
  int len = snprintf(msg, sizeof msg, "m%05d", round);
  for (int i = 0; i < LF_CONNS; i++)
    if (write(f->peer[i], msg, (size_t)len) != len) return 0;
  for (int i = 0; i < LF_CONNS; i++) {
    int have = 0;
    taxi_time_t start = taxi_now();
    while (have < len) {
      ssize_t n = read(f->peer[i], got + have, (size_t)(len - have));
      if (n > 0) {
        have += (int)n;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR) ||
                 util_elapsed_ms(start) > WAIT_MS) {
        return 0;
      } else {
        util_sleep_ms(1);
      }
    }
    if (memcmp(got, msg, (size_t)len) != 0) return 0;
  }
  return 1;
}

static void lf_fixture_start(lf_fixture_t *f, const char *backend,
                             pthread_t *join_thread) {
  memset(f, 0, sizeof *f);
  f->pool = new_pool();
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&f->r, backend), 0);
  for (int i = 0; i < LF_CONNS; i++) {
    int sv[2];
    conn_init(&f->conns[i]);
    f->conns[i].echo = 1;
    f->conns[i].sock = wrapped_pair(f->pool, sv);
    f->peer[i] = sv[1];
    f->mine[i] = sv[0];
    CU_ASSERT_EQUAL(taxi_apr_register_socket(f->r, f->conns[i].sock,
                                             &f->conns[i].h, TAXI_EV_READ),
                    0);
  }
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&f->lf, f->r, NULL), 0);
  /* The reactor first, then the pool that dispatches it: APR runs the
   * cleanups the other way round. */
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(f->r, f->pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_lf_bind(f->lf, f->pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_lf_bind(f->lf, f->pool), TAXI_EEXIST);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(f->lf, LF_THREADS), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(join_thread, NULL, joiner, f), 0);
  for (int round = 0; round < 20; round++)
    CU_ASSERT_EQUAL_FATAL(echo_round(f, round), 1);
}

/* Destroying the apr_pool_t while the L/F pool's threads run (three
 * spawned, one lent) shuts the pool down cleanly: the lent thread's join
 * returns 0, the pool is gone, the reactor with it, and every handler is
 * closed exactly once with its APR socket still open. */
static void test_pool_destroyed_while_running(void) {
  lf_fixture_t f;
  pthread_t jt;
  lf_fixture_start(&f, "apr", &jt);
  /* Keep a request outstanding while the pool goes. */
  CU_ASSERT_EQUAL(write(f.peer[0], "late", 4), 4);
  apr_pool_destroy(f.pool);
  CU_ASSERT_EQUAL(pthread_join(jt, NULL), 0);
  CU_ASSERT_EQUAL(atomic_load(&f.joined_rc), 1000 + TAXI_ESTOPPED);
  taxi_lf_stats_t st;
  CU_ASSERT_EQUAL(taxi_lf_stats(f.lf, &st), TAXI_EINVAL);
  for (int i = 0; i < LF_CONNS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&f.conns[i].closes), 1);
    CU_ASSERT_EQUAL(atomic_load(&f.conns[i].close_fd_valid), 1);
    /* taxi closed none of the sockets: an application's close hook
     * would; here the test does. */
    close(f.mine[i]);
    close(f.peer[i]);
  }
}

/* Cleared twice: the first clear stops and frees the pool of threads and
 * the reactor; the second finds nothing to do.  The stale pointers get
 * clear errors, and the pool can be used again. */
static void test_pool_cleared_twice(void) {
  lf_fixture_t f;
  pthread_t jt;
  lf_fixture_start(&f, "apr:poll", &jt);
  apr_pool_clear(f.pool);
  CU_ASSERT_EQUAL(pthread_join(jt, NULL), 0);
  CU_ASSERT_EQUAL(atomic_load(&f.joined_rc), 1000 + TAXI_ESTOPPED);
  apr_pool_clear(f.pool);
  for (int i = 0; i < LF_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&f.conns[i].closes), 1);
  taxi_lf_stats_t st;
  CU_ASSERT_EQUAL(taxi_lf_stats(f.lf, &st), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_lf_unbind(f.lf, f.pool), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_apr_reactor_unbind(f.r, f.pool), TAXI_ENOENT);
  /* A destroyed L/F pool cannot be bound again. */
  CU_ASSERT_EQUAL(taxi_apr_lf_bind(f.lf, f.pool), TAXI_EINVAL);
  /* The cleared pool takes a new binding. */
  taxi_reactor_t *r;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "apr"), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, f.pool), 0);
  apr_pool_destroy(f.pool);
  for (int i = 0; i < LF_CONNS; i++) {
    close(f.mine[i]);
    close(f.peer[i]);
  }
}

/* A half-sync/half-async pool and a proactor bound to a pool. */
static int ops_done;
static int ops_status;
static void on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  (void)op;
  (void)bytes;
  (void)act;
  ops_done++;
  ops_status = status;
}

static void test_hsha_and_proactor_bound(void) {
  apr_pool_t *pool = new_pool();
  taxi_reactor_t *r;
  taxi_hsha_pool_t *hs;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&r, "apr"), 0);
  CU_ASSERT_EQUAL(taxi_apr_reactor_bind(r, pool), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&hs, r, NULL), 0);
  CU_ASSERT_EQUAL(taxi_apr_hsha_bind(hs, pool), 0);
  CU_ASSERT_EQUAL(taxi_apr_hsha_bind(hs, pool), TAXI_EEXIST);

  taxi_proactor_t *p;
  CU_ASSERT_EQUAL_FATAL(util_proactor_create(&p, "emulated:apr"), 0);
  CU_ASSERT_EQUAL(taxi_apr_proactor_bind(p, pool), 0);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, sv[0]), 0);
  static char buf[16];
  taxi_op_t op;
  taxi_op_init(&op);
  ops_done = 0;
  CU_ASSERT_EQUAL(
      taxi_proactor_read(p, &op, sv[0], buf, sizeof buf, 0, on_read, NULL), 0);

  apr_pool_destroy(pool);
  /* The read in flight completed once, cancelled; the pools are gone. */
  CU_ASSERT_EQUAL(ops_done, 1);
  CU_ASSERT_EQUAL(ops_status, TAXI_ECANCELED);
  taxi_hsha_stats_t st;
  CU_ASSERT_EQUAL(taxi_hsha_stats(hs, &st), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_apr_hsha_bind(hs, pool = new_pool()), TAXI_EINVAL);
  apr_pool_destroy(pool);
  close(sv[1]);
}

/* ---- error codes --------------------------------------------------------- */

static void test_errors_round_trip(void) {
  for (int c = TAXI_ERROR_MIN; c <= 0; c++) {
    apr_status_t st = taxi_apr_status(c);
    int back = taxi_apr_error(st);
    int want = c == TAXI_ENOBACKEND ? TAXI_ENOTSUP : c;
    /* No APR status names these: they go as a general failure. */
    if (c == TAXI_ESYS || c == TAXI_ETLS || c == TAXI_ETRUNCATED ||
        c == TAXI_EBADCERT) {
      CU_ASSERT(st != APR_SUCCESS);
      CU_ASSERT(back < 0);
      continue;
    }
    if (back != want)
      printf("\n    %s -> %d -> %s ", taxi_error_name(c), (int)st,
             taxi_error_name(back));
    CU_ASSERT_EQUAL(back, want);
    CU_ASSERT_EQUAL(st == APR_SUCCESS, c == 0);
  }
  /* Not TAXI_E* codes. */
  CU_ASSERT_EQUAL(taxi_apr_status(1), APR_EGENERAL);
  CU_ASSERT_EQUAL(taxi_apr_status(-9999), APR_EGENERAL);
}

static void test_errors_from_apr(void) {
  CU_ASSERT_EQUAL(taxi_apr_error(APR_SUCCESS), 0);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_TIMEUP), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_EOF), TAXI_EEOF);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_ENOTIMPL), TAXI_ENOTSUP);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_NOTFOUND), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_EBUSY), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_EGENERAL), TAXI_ESYS);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_INCOMPLETE), TAXI_ESYS);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_FROM_OS_ERROR(EMFILE)), TAXI_ETOOMANY);
  CU_ASSERT_EQUAL(taxi_apr_error(APR_FROM_OS_ERROR(EACCES)), TAXI_EPERM);

  /* A real APR failure: connecting where nobody listens. */
  apr_pool_t *pool = new_pool();
  int port;
  int lfd = util_tcp_listener(&port);
  CU_ASSERT_FATAL(lfd >= 0);
  close(lfd); /* the port is free again, and nobody listens on it */
  apr_sockaddr_t *sa;
  apr_socket_t *s;
  CU_ASSERT_EQUAL_FATAL(apr_sockaddr_info_get(&sa, "127.0.0.1", APR_INET,
                                              (apr_port_t)port, 0, pool),
                        APR_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(
      apr_socket_create(&s, APR_INET, SOCK_STREAM, APR_PROTO_TCP, pool),
      APR_SUCCESS);
  CU_ASSERT_EQUAL(taxi_apr_error(apr_socket_connect(s, sa)), TAXI_ECONNREFUSED);
  apr_pool_destroy(pool);
}

/* ---- registry ------------------------------------------------------------ */

static CU_TestInfo handle_tests[] = {
    {"register an apr_socket_t", test_register_socket},
    {"register an apr_file_t (pipe)", test_register_file},
    {"bad input: no OS handle, NULL", test_handles_bad_input},
    {"apr: names, unknown method, honest capabilities", test_backend_names},
    CU_TEST_INFO_NULL,
};
static CU_TestInfo lifetime_tests[] = {
    {"reactor bound and unbound", test_reactor_bound},
    {"apr_pool_t destroyed while an L/F pool runs",
     test_pool_destroyed_while_running},
    {"apr_pool_t cleared twice", test_pool_cleared_twice},
    {"hsha pool and proactor bound", test_hsha_and_proactor_bound},
    CU_TEST_INFO_NULL,
};
static CU_TestInfo error_tests[] = {
    {"TAXI_E* -> apr_status_t -> TAXI_E*", test_errors_round_trip},
    {"apr_status_t -> TAXI_E*", test_errors_from_apr},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t handles_suite = {"apr.h: handles", handle_tests,
                                                0, NULL};
static const taxi_test_suite_t lifetime_suite = {"apr.h: lifetime",
                                                 lifetime_tests, 0, NULL};
static const taxi_test_suite_t errors_suite = {"apr.h: errors", error_tests, 0,
                                               NULL};

int main(int argc, char **argv) {
  if (apr_initialize() != APR_SUCCESS) {
    fprintf(stderr, "apr_initialize failed\n");
    return 1;
  }
  const taxi_test_suite_t *const suites[] = {&handles_suite, &lifetime_suite,
                                             &errors_suite};
  int rc = taxi_test_run("taxi/apr.h", suites, sizeof suites / sizeof suites[0],
                         argc, argv);
  apr_terminate();
  return rc;
}
