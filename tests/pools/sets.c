/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets.c - Leader/Followers per handle set (taxi/lf_sets.h) and
 * moving handlers between reactors (taxi_reactor_move in taxi/reactor.h):
 * creation and the accessors, kernel balancing (SO_REUSEPORT), the shared
 * acceptor's least-loaded registration, moves from another thread (idle,
 * deferred, and during traffic) and from the handler's own hook, moves of
 * suspended handlers, removal cancelling a deferred move, close hooks at
 * destruction, and bad input.
 *
 * Self-contained: it uses tests/runner.h and tests/util.h only, so that it
 * does not depend on the other pool suites' fixtures.  The suite is made
 * by pools_sets_suite(backend); every set and reactor of its tests uses
 * that backend.
 *
 * Clients are plain blocking sockets in the test thread with 5 s send and
 * receive time limits, so a bug fails a test instead of hanging it; every
 * other wait is bounded too (SETS_WAIT_MS).  Data shared between hooks and
 * the test thread is atomic, or read after taxi_lf_sets_destroy() (which
 * joins the pools' threads).
 */
#define _GNU_SOURCE 1

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "taxi/taxi.h"
#include "../runner.h"
#include "../util.h"

const taxi_test_suite_t *pools_sets_suite(const char *backend);

#define SETS_WAIT_MS 10000 /* bound of every wait for the library */
#define SETS_QUIET_MS 300  /* how long "nothing happens" is watched */
#define SETS_CLIENT_TIMEOUT_S 5
#define SETS_MAX_SETS 8      /* sets the tests use at most */
#define SETS_MAX_CONNS 128   /* connections one server accepts at most */
#define SETS_MAX_ACCEPTORS 8 /* listeners one server makes at most */

static const char *sets_backend;

/* ---- small helpers ------------------------------------------------------- */

static taxi_lf_sets_t *sets_make(unsigned n, unsigned threads) {
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.sets = n;
  o.threads_per_set = threads;
  o.backend = sets_backend;
  taxi_lf_sets_t *s = NULL;
  int rc = taxi_lf_sets_create(&s, &o);
  if (rc != 0 || !s)
    printf("\n    taxi_lf_sets_create(%u sets, \"%s\") = %d (%s)\n", n,
           sets_backend, rc, taxi_error_name(rc));
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  return s;
}

static size_t sets_handles(taxi_reactor_t *r) {
  taxi_reactor_stats_t st;
  memset(&st, 0, sizeof st);
  int rc = taxi_reactor_stats(r, &st);
  CU_ASSERT_EQUAL(rc, 0);
  return st.handles;
}

/* Wait (bounded) until reactor r has `want` handles; 1 when it has. */
static int sets_wait_handles(taxi_reactor_t *r, size_t want) {
  taxi_time_t start = taxi_now();
  while (sets_handles(r) != want) {
    if (util_elapsed_ms(start) > SETS_WAIT_MS) return 0;
    util_sleep_ms(1);
  }
  return 1;
}

/* Which set's pool the calling thread belongs to, or -1. */
static int sets_current(const taxi_lf_sets_t *s) {
  unsigned n = taxi_lf_sets_count(s);
  for (unsigned i = 0; i < n; i++)
    if (taxi_lf_current_thread(taxi_lf_sets_pool(s, i)) >= 0) return (int)i;
  return -1;
}

static void sets_destroy(taxi_lf_sets_t *s) {
  int rc = taxi_lf_sets_destroy(s);
  if (rc != 0)
    printf("\n    taxi_lf_sets_destroy = %d (%s)\n", rc, taxi_error_name(rc));
  CU_ASSERT_EQUAL(rc, 0);
}

static void client_timeouts(int fd) {
  struct timeval tv = {SETS_CLIENT_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A blocking TCP client connected to 127.0.0.1:port, or -1. */
static int client_connect(unsigned port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  client_timeouts(fd);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* 0 when all n bytes were written. */
static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* 0 when all n bytes were read; -1 on error, time-out or end of stream. */
static int recv_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n) {
    ssize_t k = recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Write all of buf to a non-blocking descriptor (waiting, bounded, for
 * room); 0 on success. */
static int write_all_nb(int fd, const char *buf, size_t n) {
  while (n) {
    ssize_t k = write(fd, buf, n);
    if (k > 0) {
      buf += k;
      n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pfd = {fd, POLLOUT, 0};
      if (poll(&pfd, 1, SETS_CLIENT_TIMEOUT_S * 1000) <= 0) return -1;
      continue;
    }
    return -1;
  }
  return 0;
}

/* A socketpair: sv[0] non-blocking for a handler, sv[1] blocking with
 * time limits for the test thread.  CU_FAIL_FATAL when impossible. */
static void sets_pair(int sv[2]) {
  if (util_socketpair(sv) != 0) {
    printf("\n    socketpair: %s\n", strerror(errno));
    CU_FAIL_FATAL("socketpair failed");
  }
  int fl = fcntl(sv[1], F_GETFL);
  fcntl(sv[1], F_SETFL, fl & ~O_NONBLOCK);
  client_timeouts(sv[1]);
}

/* The 8-byte frames the movable handlers echo: connection, sequence. */
typedef struct sets_msg {
  uint32_t conn, seq;
} sets_msg_t;

static int msg_send(int fd, uint32_t conn, uint32_t seq) {
  sets_msg_t m = {conn, seq};
  return send_all(fd, &m, sizeof m);
}

/* 0 when the echo of (conn, seq) came back. */
static int msg_expect(int fd, uint32_t conn, uint32_t seq) {
  sets_msg_t m;
  if (recv_all(fd, &m, sizeof m) != 0) return -1;
  return m.conn == conn && m.seq == seq ? 0 : -2;
}

/* ---- a TCP echo server over the sets ------------------------------------- */

typedef struct sets_server sets_server_t;

typedef struct sets_conn {
  taxi_handler_t h;
  int fd;
  int set; /* the set it was registered with, -1 when not known up front */
  sets_server_t *srv;
  atomic_int inputs;
  atomic_int closes;
} sets_conn_t;

typedef struct sets_acceptor {
  taxi_handler_t h;
  int fd;
  unsigned set;
  sets_server_t *srv;
  atomic_int closes;
} sets_acceptor_t;

struct sets_server {
  taxi_lf_sets_t *s;
  atomic_int balance; /* TAXI_BALANCE_KERNEL or _ACCEPTOR */
  sets_acceptor_t acc[SETS_MAX_ACCEPTORS];
  atomic_int made;             /* acceptors made */
  atomic_int listener_closes;  /* acceptors' close hooks */
  atomic_int listener_bad_set; /* acceptor made for a set out of range */
  sets_conn_t conns[SETS_MAX_CONNS];
  atomic_int nconns;                  /* connections accepted */
  atomic_int accepted[SETS_MAX_SETS]; /* registered, per set */
  atomic_int registered;              /* the sum of accepted */
  atomic_int register_errors, accept_errors, overflow, bad_index;
  atomic_int wrong_set;   /* a hook ran in another set's pool */
  atomic_int echo_errors; /* writing an echo failed */
  atomic_int closes;      /* connections' close hooks */
};

#define CONN(hp) TAXI_CONTAINER_OF(hp, sets_conn_t, h)
#define ACCEPTOR(hp) TAXI_CONTAINER_OF(hp, sets_acceptor_t, h)

static int conn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  sets_conn_t *c = CONN(h);
  (void)ev;
  atomic_fetch_add(&c->inputs, 1);
  if (c->set >= 0 && taxi_lf_current_thread(
                         taxi_lf_sets_pool(c->srv->s, (unsigned)c->set)) < 0)
    atomic_fetch_add(&c->srv->wrong_set, 1);
  char buf[2048];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      if (write_all_nb(fd, buf, (size_t)n) != 0) {
        atomic_fetch_add(&c->srv->echo_errors, 1);
        return -1;
      }
      continue;
    }
    if (n == 0) return -1; /* the client closed: remove, then close */
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

static void conn_close(taxi_handler_t *h, taxi_handle_t fd) {
  sets_conn_t *c = CONN(h);
  (void)fd;
  close(c->fd);
  c->fd = -1;
  atomic_fetch_add(&c->closes, 1);
  atomic_fetch_add(&c->srv->closes, 1);
}

static const taxi_handler_ops_t conn_ops = {.input = conn_input,
                                            .close = conn_close};

static int acceptor_input(taxi_handler_t *h, taxi_handle_t lfd, unsigned ev) {
  sets_acceptor_t *a = ACCEPTOR(h);
  sets_server_t *srv = a->srv;
  (void)ev;
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        atomic_fetch_add(&srv->accept_errors, 1);
      return 0;
    }
    int k = atomic_fetch_add(&srv->nconns, 1);
    if (k >= SETS_MAX_CONNS) {
      atomic_fetch_add(&srv->overflow, 1);
      close(fd);
      continue;
    }
    sets_conn_t *c = &srv->conns[k];
    c->fd = fd;
    c->srv = srv;
    atomic_init(&c->inputs, 0);
    atomic_init(&c->closes, 0);
    taxi_handler_init(&c->h, &conn_ops);
    int rc, set;
    if (atomic_load(&srv->balance) == TAXI_BALANCE_KERNEL) {
      /* Everything about c is written before it is registered. */
      c->set = (int)a->set;
      rc = taxi_reactor_register(taxi_lf_sets_reactor(srv->s, a->set), fd,
                                 &c->h, TAXI_EV_READ);
      set = (int)a->set;
    } else {
      c->set = -1;
      rc = taxi_lf_sets_register(srv->s, fd, &c->h, TAXI_EV_READ);
      set = rc;
    }
    if (rc < 0) {
      atomic_fetch_add(&srv->register_errors, 1);
      close(fd);
      continue;
    }
    if (set >= SETS_MAX_SETS || set >= (int)taxi_lf_sets_count(srv->s))
      atomic_fetch_add(&srv->bad_index, 1);
    else
      atomic_fetch_add(&srv->accepted[set], 1);
    atomic_fetch_add(&srv->registered, 1);
  }
}

static void acceptor_close(taxi_handler_t *h, taxi_handle_t fd) {
  sets_acceptor_t *a = ACCEPTOR(h);
  (void)fd;
  close(a->fd);
  a->fd = -1;
  atomic_fetch_add(&a->closes, 1);
  atomic_fetch_add(&a->srv->listener_closes, 1);
}

static const taxi_handler_ops_t acceptor_ops = {.input = acceptor_input,
                                                .close = acceptor_close};

static taxi_handler_t *make_acceptor(unsigned set, taxi_handle_t listener,
                                     void *arg) {
  sets_server_t *srv = arg;
  if (set >= taxi_lf_sets_count(srv->s))
    atomic_fetch_add(&srv->listener_bad_set, 1);
  int k = atomic_fetch_add(&srv->made, 1);
  if (k >= SETS_MAX_ACCEPTORS) return NULL;
  sets_acceptor_t *a = &srv->acc[k];
  a->fd = listener;
  a->set = set;
  a->srv = srv;
  atomic_init(&a->closes, 0);
  taxi_handler_init(&a->h, &acceptor_ops);
  return &a->h;
}

static sets_server_t *server_new(taxi_lf_sets_t *s) {
  sets_server_t *srv = calloc(1, sizeof *srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
  srv->s = s;
  return srv;
}

/* Wait (bounded) until *counter >= goal. */
static int wait_count(atomic_int *counter, int goal) {
  return util_wait_flag(counter, goal, SETS_WAIT_MS);
}

/* Connect n clients to port and check that each echoes a message of its
 * own.  Returns how many echoed; fds[] gets the clients (-1 for failures). */
static int clients_echo(unsigned port, int *fds, int n) {
  int ok = 0;
  for (int i = 0; i < n; i++) {
    fds[i] = client_connect(port);
    if (fds[i] < 0) printf("\n    connect %d: %s\n", i, strerror(errno));
  }
  for (int i = 0; i < n; i++) {
    if (fds[i] < 0) continue;
    char out[32], in[32];
    int len = snprintf(out, sizeof out, "hello from client %03d", i);
    memset(in, 0, sizeof in);
    if (send_all(fds[i], out, (size_t)len) == 0 &&
        recv_all(fds[i], in, (size_t)len) == 0 && memcmp(in, out, len) == 0)
      ok++;
    else
      printf("\n    client %d: no correct echo (%s)\n", i, strerror(errno));
  }
  return ok;
}

static void clients_close(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* ---- movable handlers on socketpairs ------------------------------------- */

typedef struct sets_mtest sets_mtest_t;

enum { MOVE_NONE = 0, MOVE_ON_FIRST = 1 };

typedef struct sets_mconn {
  taxi_handler_t h;
  int sv[2];
  sets_mtest_t *t;
  uint32_t index;
  int mode;     /* MOVE_NONE, MOVE_ON_FIRST */
  int target;   /* MOVE_ON_FIRST: the set to move to */
  int gate;     /* the input hook blocks on t->gate_open first */
  int hook_ret; /* what the input hook returns (0 or -1) */
  /* Hook-only state (the hooks of one handler never overlap). */
  unsigned char buf[64];
  size_t have;
  uint32_t next_seq;
  int first_set;
  int move_rc, move2_rc;
  /* Shared with the test thread. */
  atomic_int inputs, timeouts, closes;
  atomic_int errors;    /* a frame out of order or of another connection */
  atomic_int wrong_set; /* MOVE_ON_FIRST: a later frame not on target */
  atomic_int last_set;  /* the set whose pool ran the last hook */
  atomic_int timeout_set;
  atomic_int frames;
  atomic_int on_set[SETS_MAX_SETS]; /* input hooks run per set */
  atomic_int outside;               /* hooks run outside every pool */
  /* The mover thread's protocol: it moves the handler to set w and sets
   * this to 2 * w; a hook that runs on set w makes it 2 * w + 1 (arrived),
   * and only then may the mover move it again. -1: not taking part. */
  atomic_int where;
} sets_mconn_t;

struct sets_mtest {
  taxi_lf_sets_t *s;
  atomic_int gate_entered, gate_open, gate_timeouts;
};

#define MCONN(hp) TAXI_CONTAINER_OF(hp, sets_mconn_t, h)

static void mconn_frame(sets_mconn_t *c, int cur, const sets_msg_t *m) {
  if (m->conn != c->index || m->seq != c->next_seq)
    atomic_fetch_add(&c->errors, 1);
  c->next_seq = m->seq + 1;
  if (c->mode == MOVE_ON_FIRST) {
    if (m->seq == 0) {
      c->first_set = cur;
      taxi_reactor_t *from = taxi_lf_sets_reactor(c->t->s, (unsigned)cur);
      taxi_reactor_t *to = taxi_lf_sets_reactor(c->t->s, (unsigned)c->target);
      c->move_rc = cur < 0 ? -999 : taxi_reactor_move(from, &c->h, to);
    } else if (cur != c->target) {
      atomic_fetch_add(&c->wrong_set, 1);
    }
  }
  atomic_fetch_add(&c->frames, 1);
}

static int mconn_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  sets_mconn_t *c = MCONN(h);
  (void)ev;
  int cur = sets_current(c->t->s);
  atomic_store(&c->last_set, cur);
  if (cur >= 0 && cur < SETS_MAX_SETS)
    atomic_fetch_add(&c->on_set[cur], 1);
  else
    atomic_fetch_add(&c->outside, 1);
  atomic_fetch_add(&c->inputs, 1);
  int expect = 2 * cur;
  if (cur >= 0) atomic_compare_exchange_strong(&c->where, &expect, 2 * cur + 1);
  if (c->gate) {
    atomic_fetch_add(&c->t->gate_entered, 1);
    if (!util_wait_flag(&c->t->gate_open, 1, SETS_WAIT_MS))
      atomic_fetch_add(&c->t->gate_timeouts, 1);
  }
  /* One read per call (what is left is reported again): a client in
   * lock-step with its echoes then has each message handled by a hook of
   * its own, so a message sent after a move was asked cannot be read by the
   * hook that asked it, which is still on the old set. */
  ssize_t n;
  do n = read(fd, c->buf + c->have, sizeof c->buf - c->have);
  while (n < 0 && errno == EINTR);
  if (n == 0) return -1;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? c->hook_ret : -1;
  c->have += (size_t)n;
  size_t off = 0;
  while (c->have - off >= sizeof(sets_msg_t)) {
    sets_msg_t m;
    memcpy(&m, c->buf + off, sizeof m);
    mconn_frame(c, cur, &m);
    off += sizeof m;
  }
  if (write_all_nb(fd, (const char *)c->buf, off) != 0)
    atomic_fetch_add(&c->errors, 1);
  memmove(c->buf, c->buf + off, c->have - off);
  c->have -= off;
  return c->hook_ret;
}

static int mconn_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act) {
  sets_mconn_t *c = MCONN(h);
  (void)t;
  (void)act;
  atomic_store(&c->timeout_set, sets_current(c->t->s));
  atomic_fetch_add(&c->timeouts, 1);
  return 0;
}

static void mconn_close(taxi_handler_t *h, taxi_handle_t fd) {
  sets_mconn_t *c = MCONN(h);
  (void)fd;
  if (c->sv[0] >= 0) close(c->sv[0]);
  c->sv[0] = -1;
  atomic_fetch_add(&c->closes, 1);
}

static const taxi_handler_ops_t mconn_ops = {
    .input = mconn_input, .timeout = mconn_timeout, .close = mconn_close};

static void mtest_init(sets_mtest_t *t, taxi_lf_sets_t *s) {
  t->s = s;
  atomic_init(&t->gate_entered, 0);
  atomic_init(&t->gate_open, 0);
  atomic_init(&t->gate_timeouts, 0);
}

/* Zero c, give it a socketpair, init its handler (not registered). */
static void mconn_init(sets_mconn_t *c, sets_mtest_t *t, uint32_t index) {
  memset(c, 0, sizeof *c);
  sets_pair(c->sv);
  c->t = t;
  c->index = index;
  c->first_set = -1;
  c->move_rc = c->move2_rc = 12345;
  atomic_init(&c->inputs, 0);
  atomic_init(&c->timeouts, 0);
  atomic_init(&c->closes, 0);
  atomic_init(&c->errors, 0);
  atomic_init(&c->wrong_set, 0);
  atomic_init(&c->last_set, -2);
  atomic_init(&c->timeout_set, -2);
  atomic_init(&c->frames, 0);
  atomic_init(&c->outside, 0);
  for (int i = 0; i < SETS_MAX_SETS; i++) atomic_init(&c->on_set[i], 0);
  atomic_init(&c->where, -1);
  CU_ASSERT_EQUAL(taxi_handler_init(&c->h, &mconn_ops), 0);
}

/* The test's end of the pair; the handler's end is closed by its close
 * hook. */
static void mconn_close_client(sets_mconn_t *c) {
  if (c->sv[1] >= 0) close(c->sv[1]);
  c->sv[1] = -1;
}

/* ---- 1. creation and the accessors --------------------------------------- */

static void test_create_accessors(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(s), 3u);
  taxi_reactor_t *r[3];
  taxi_lf_pool_t *p[3];
  for (unsigned i = 0; i < 3; i++) {
    r[i] = taxi_lf_sets_reactor(s, i);
    p[i] = taxi_lf_sets_pool(s, i);
    CU_ASSERT_PTR_NOT_NULL(r[i]);
    CU_ASSERT_PTR_NOT_NULL(p[i]);
    if (r[i]) {
      CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r[i]), sets_backend);
    }
    CU_ASSERT_EQUAL(taxi_lf_sets_index(s, r[i]), (int)i);
    for (unsigned j = 0; j < i; j++) {
      CU_ASSERT_PTR_NOT_EQUAL(r[i], r[j]);
      CU_ASSERT_PTR_NOT_EQUAL(p[i], p[j]);
    }
  }
  /* Out of range, and reactors that are not one of the sets. */
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(s, 3));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(s, 3));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(s, UINT32_MAX));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(s, UINT32_MAX));
  CU_ASSERT_EQUAL(taxi_lf_sets_index(s, NULL), -1);
  taxi_reactor_t *other = NULL;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&other, sets_backend), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_index(s, other), -1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(other), 0);
  /* Each pool gets its threads_per_set threads (they start on their own
   * time: wait, bounded). */
  for (unsigned i = 0; i < 3; i++) {
    taxi_lf_stats_t st;
    taxi_time_t start = taxi_now();
    do {
      memset(&st, 0, sizeof st);
      CU_ASSERT_EQUAL(taxi_lf_stats(p[i], &st), 0);
      if (st.threads == 2) break;
      util_sleep_ms(1);
    } while (util_elapsed_ms(start) < SETS_WAIT_MS);
    CU_ASSERT_EQUAL(st.threads, 2u);
  }
  /* The pools own their reactors: direct dispatch is refused. */
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r[0], 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* Zeroed options: one set per processor online, one thread each. */
static void test_create_defaults(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned want = cpus > 0 ? (unsigned)cpus : 1u;
  if (want > TAXI_LF_SETS_MAX) want = TAXI_LF_SETS_MAX;
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.backend = sets_backend;
  taxi_lf_sets_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_sets_create(&s, &o), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(s), want);
  taxi_lf_stats_t st;
  taxi_time_t start = taxi_now();
  do {
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(taxi_lf_stats(taxi_lf_sets_pool(s, 0), &st), 0);
    if (st.threads == 1) break;
    util_sleep_ms(1);
  } while (util_elapsed_ms(start) < SETS_WAIT_MS);
  CU_ASSERT_EQUAL(st.threads, 1u);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* ---- 2. kernel balancing ------------------------------------------------- */

#define KERNEL_CONNS 64

static void test_kernel_balance(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor, srv, &port);
  CU_ASSERT(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  if (rc != TAXI_BALANCE_KERNEL) {
    /* AUTO chose the acceptor: the kernel does not balance here, so asking
     * for it must be refused, without making a listener. */
    printf("\n    note: AUTO chose %d: the kernel does not balance here\n", rc);
    taxi_lf_sets_t *s2 = sets_make(2, 1);
    sets_server_t *srv2 = server_new(s2);
    CU_ASSERT_EQUAL(taxi_lf_sets_listen(s2, "127.0.0.1", 0, TAXI_BALANCE_KERNEL,
                                        make_acceptor, srv2, NULL),
                    TAXI_ENOTSUP);
    CU_ASSERT_EQUAL(atomic_load(&srv2->made), 0);
    sets_destroy(s2);
    free(srv2);
    sets_destroy(s);
    free(srv);
    return;
  }
  atomic_store(&srv->balance, TAXI_BALANCE_KERNEL);
  CU_ASSERT_NOT_EQUAL(port, 0u);
  /* A listener (and acceptor) per set, one for each. */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 2);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_bad_set), 0);
  if (atomic_load(&srv->made) == 2)
    CU_ASSERT_NOT_EQUAL(srv->acc[0].set, srv->acc[1].set);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 0)), 1u);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 1)), 1u);

  int fds[KERNEL_CONNS];
  int ok = clients_echo(port, fds, KERNEL_CONNS);
  CU_ASSERT_EQUAL(ok, KERNEL_CONNS);
  CU_ASSERT(wait_count(&srv->registered, KERNEL_CONNS));
  int a0 = atomic_load(&srv->accepted[0]);
  int a1 = atomic_load(&srv->accepted[1]);
  if (a0 == 0 || a1 == 0) printf("\n    accepted per set: %d, %d\n", a0, a1);
  CU_ASSERT(a0 > 0);
  CU_ASSERT(a1 > 0);
  CU_ASSERT_EQUAL(a0 + a1, KERNEL_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->wrong_set), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->register_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->accept_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->echo_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->bad_index), 0);

  /* The clients hang up: every connection closes, once. */
  clients_close(fds, KERNEL_CONNS);
  CU_ASSERT(wait_count(&srv->closes, KERNEL_CONNS));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), KERNEL_CONNS);
  int n = atomic_load(&srv->nconns);
  CU_ASSERT_EQUAL(n, KERNEL_CONNS);
  for (int i = 0; i < n && i < SETS_MAX_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->conns[i].closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 2);
  free(srv);
}

/* host NULL: every address, so 127.0.0.1 reaches it; port 0 reported. */
static void test_listen_any_host(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, NULL, 0, TAXI_BALANCE_AUTO, make_acceptor,
                               srv, &port);
  CU_ASSERT_FATAL(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  atomic_store(&srv->balance, rc);
  CU_ASSERT(port > 0 && port <= 65535);
  int fds[4];
  CU_ASSERT_EQUAL(clients_echo(port, fds, 4), 4);
  clients_close(fds, 4);
  CU_ASSERT(wait_count(&srv->closes, 4));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes),
                  rc == TAXI_BALANCE_KERNEL ? 2 : 1);
  free(srv);
}

/* ---- 3. acceptor balancing ----------------------------------------------- */

#define ACCEPTOR_SETS 3
#define ACCEPTOR_CONNS 60

static void test_acceptor_balance(void) {
  taxi_lf_sets_t *s = sets_make(ACCEPTOR_SETS, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, TAXI_BALANCE_ACCEPTOR);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_ACCEPTOR,
                               make_acceptor, srv, &port);
  CU_ASSERT_EQUAL_FATAL(rc, TAXI_BALANCE_ACCEPTOR);
  CU_ASSERT_NOT_EQUAL(port, 0u);
  /* One listener, on set 0. */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 1);
  CU_ASSERT_EQUAL(srv->acc[0].set, 0u);
  CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, 0)), 1u);

  /* Every client stays connected until all are counted, so no set's load
   * drops while the acceptor spreads them. */
  int fds[ACCEPTOR_CONNS];
  int ok = clients_echo(port, fds, ACCEPTOR_CONNS);
  CU_ASSERT_EQUAL(ok, ACCEPTOR_CONNS);
  CU_ASSERT(wait_count(&srv->registered, ACCEPTOR_CONNS));
  CU_ASSERT_EQUAL(atomic_load(&srv->register_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->bad_index), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->echo_errors), 0);
  int sum = 0;
  size_t load[ACCEPTOR_SETS], lo = SIZE_MAX, hi = 0;
  for (unsigned i = 0; i < ACCEPTOR_SETS; i++) {
    int a = atomic_load(&srv->accepted[i]);
    load[i] = sets_handles(taxi_lf_sets_reactor(s, i));
    printf("%s set %u: %d connections, %zu handles", i ? ";" : "\n    ", i, a,
           load[i]);
    sum += a;
    CU_ASSERT(a >= 15 && a <= 25);
    /* The set's handles are its connections, plus the listener on 0. */
    CU_ASSERT_EQUAL(load[i], (size_t)a + (i == 0));
    if (load[i] < lo) lo = load[i];
    if (load[i] > hi) hi = load[i];
  }
  printf("\n");
  CU_ASSERT_EQUAL(sum, ACCEPTOR_CONNS);
  /* "The set that has the fewest handles": registered one by one with no
   * handle leaving, the handle counts never differ by more than one.  (The
   * listener is a handle of set 0 too, so the connections come out 19, 20,
   * 21 or 20, 20, 20 depending on the ties, not always 20 each.) */
  CU_ASSERT(hi - lo <= 1);

  clients_close(fds, ACCEPTOR_CONNS);
  CU_ASSERT(wait_count(&srv->closes, ACCEPTOR_CONNS));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), ACCEPTOR_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 1);
  free(srv);
}

/* taxi_lf_sets_register directly: fewest handles first, and its return
 * value is the set registered with. */
static void test_register_least_loaded(void) {
  taxi_lf_sets_t *s = sets_make(3, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t c[7];
  /* Load sets 0 and 2 with two handles each by hand. */
  mconn_init(&c[0], &t, 0);
  mconn_init(&c[1], &t, 1);
  mconn_init(&c[2], &t, 2);
  mconn_init(&c[3], &t, 3);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 0), c[0].sv[0],
                                        &c[0].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 0), c[1].sv[0],
                                        &c[1].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 2), c[2].sv[0],
                                        &c[2].h, TAXI_EV_READ),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 2), c[3].sv[0],
                                        &c[3].h, TAXI_EV_READ),
                  0);
  /* Loads 2, 0, 2: the next two go to set 1 whatever the turn. */
  mconn_init(&c[4], &t, 4);
  mconn_init(&c[5], &t, 5);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[4].sv[0], &c[4].h, TAXI_EV_READ),
                  1);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[5].sv[0], &c[5].h, TAXI_EV_READ),
                  1);
  for (unsigned i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, i)), 2u);
  mconn_init(&c[6], &t, 6);
  /* A handle that is not open, and bad events, are refused. */
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, -1, &c[6].h, TAXI_EV_READ),
                  TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[6].sv[0], &c[6].h, 0),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(s, c[6].sv[0], NULL, TAXI_EV_READ),
                  TAXI_EINVAL);
  sets_destroy(s);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    mconn_close_client(&c[i]);
  }
  if (c[6].sv[0] >= 0) close(c[6].sv[0]);
  mconn_close_client(&c[6]);
}

/* ---- 4. move while idle, from another thread ----------------------------- */

static void test_move_idle(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 7);

  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  /* First it works on set 0. */
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 7, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 7, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 0);
  /* The hook may still be on its way out: the move is immediate or
   * deferred, it returns 0 either way and completes soon. */
  size_t h0 = sets_handles(r0), h1 = sets_handles(r1);
  CU_ASSERT_EQUAL(h0, 1u);
  CU_ASSERT_EQUAL(h1, 0u);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  CU_ASSERT(sets_wait_handles(r0, h0 - 1));
  CU_ASSERT(sets_wait_handles(r1, h1 + 1));

  /* Now set 1's pool serves it, and set 0 knows it no more. */
  int before0 = atomic_load(&c->on_set[0]);
  for (uint32_t k = 1; k <= 5; k++) {
    CU_ASSERT_EQUAL(msg_send(c->sv[1], 7, k), 0);
    CU_ASSERT_EQUAL(msg_expect(c->sv[1], 7, k), 0);
    CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), before0);
  CU_ASSERT(atomic_load(&c->on_set[1]) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&c->outside), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r0, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r0, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), TAXI_ENOENT);

  /* A second handler that never had an event: the move is done before
   * taxi_reactor_move returns. */
  sets_mconn_t *d = calloc(1, sizeof *d);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  mconn_init(d, &t, 8);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, d->sv[0], &d->h, TAXI_EV_READ), 0);
  h0 = sets_handles(r0);
  h1 = sets_handles(r1);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &d->h, r1), 0);
  CU_ASSERT_EQUAL(sets_handles(r0), h0 - 1);
  CU_ASSERT_EQUAL(sets_handles(r1), h1 + 1);
  CU_ASSERT_EQUAL(msg_send(d->sv[1], 8, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(d->sv[1], 8, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&d->last_set), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->on_set[0]), 0);

  /* And back again, to set 0. */
  CU_ASSERT(wait_count(&d->frames, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &d->h, r0), 0);
  CU_ASSERT(sets_wait_handles(r0, h0));
  CU_ASSERT_EQUAL(msg_send(d->sv[1], 8, 1), 0);
  CU_ASSERT_EQUAL(msg_expect(d->sv[1], 8, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&d->last_set), 0);

  /* Removal from the reactor it is on now closes it, once. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c->h), 0);
  CU_ASSERT(wait_count(&c->closes, 1));
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&d->errors), 0);
  mconn_close_client(c);
  mconn_close_client(d);
  free(c);
  free(d);
}

/* ---- 5. move from the handler's own hook (deferred) ---------------------- */

#define HOOK_SETS 3
#define HOOK_CONNS 20
#define HOOK_ROUNDS 50 /* 20 x 50 = 1000 messages */

static void test_move_from_hook(void) {
  taxi_lf_sets_t *s = sets_make(HOOK_SETS, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(HOOK_CONNS, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  size_t start_load[HOOK_SETS] = {0}, end_load[HOOK_SETS] = {0};
  for (uint32_t i = 0; i < HOOK_CONNS; i++) {
    mconn_init(&c[i], &t, i);
    c[i].mode = MOVE_ON_FIRST;
    c[i].target = (int)((i + 1) % HOOK_SETS);
    start_load[i % HOOK_SETS]++;
    end_load[(i + 1) % HOOK_SETS]++;
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(taxi_lf_sets_reactor(s, i % HOOK_SETS),
                              c[i].sv[0], &c[i].h, TAXI_EV_READ),
        0);
  }
  for (unsigned k = 0; k < HOOK_SETS; k++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, k)), start_load[k]);

  /* Round k: message k on every connection, then every echo.  The
   * connections run in parallel; each is in lock-step with its echoes, so
   * message 1 is sent once message 0 was handled (and its move asked). */
  int echoed = 0, failed = 0;
  for (uint32_t k = 0; k < HOOK_ROUNDS && !failed; k++) {
    for (uint32_t i = 0; i < HOOK_CONNS; i++)
      if (msg_send(c[i].sv[1], i, k) != 0) failed++;
    for (uint32_t i = 0; i < HOOK_CONNS; i++) {
      int rc = msg_expect(c[i].sv[1], i, k);
      if (rc == 0) {
        echoed++;
      } else {
        if (!failed)
          printf("\n    connection %u, message %u: %s\n", i, k,
                 rc == -2 ? "wrong echo" : "no echo");
        failed++;
      }
    }
  }
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(echoed, HOOK_CONNS * HOOK_ROUNDS);
  /* Every move has completed: later messages came from the target. */
  for (unsigned k = 0; k < HOOK_SETS; k++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, k)), end_load[k]);

  sets_destroy(s); /* joins the threads: the hook-only state is ours now */
  int wrong = 0, bad_rc = 0, bad_first = 0, errors = 0;
  for (uint32_t i = 0; i < HOOK_CONNS; i++) {
    if (c[i].move_rc != 0) bad_rc++;
    if (c[i].first_set != (int)(i % HOOK_SETS)) bad_first++;
    wrong += atomic_load(&c[i].wrong_set);
    errors += atomic_load(&c[i].errors);
    CU_ASSERT_EQUAL(c[i].next_seq, (uint32_t)HOOK_ROUNDS);
    CU_ASSERT_EQUAL(atomic_load(&c[i].frames), HOOK_ROUNDS);
    CU_ASSERT_EQUAL(atomic_load(&c[i].outside), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    /* One hook on the first set (message 0), the rest on the target. */
    CU_ASSERT_EQUAL(atomic_load(&c[i].on_set[i % HOOK_SETS]), 1);
    CU_ASSERT(atomic_load(&c[i].on_set[c[i].target]) >= HOOK_ROUNDS - 1);
    if (c[i].move_rc != 0 && bad_rc == 1)
      printf("\n    connection %u: taxi_reactor_move in its hook = %d (%s)\n",
             i, c[i].move_rc, taxi_error_name(c[i].move_rc));
    mconn_close_client(&c[i]);
  }
  CU_ASSERT_EQUAL(bad_rc, 0);
  CU_ASSERT_EQUAL(bad_first, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(errors, 0);
  free(c);
}

/* Moves from another thread while traffic flows.  A mover thread moves
 * each handler to another set as soon as one of its hooks has run on the
 * set it was last sent to (so taxi_reactor_move is always given the
 * reactor the handler is on, or is about to leave: it must return 0),
 * often while that hook still runs (deferred), sometimes when idle.
 * Every message must be echoed once, in order. */

#define MOVER_SETS 3
#define MOVER_CONNS 8
#define MOVER_ROUNDS 150

typedef struct sets_mover {
  taxi_lf_sets_t *s;
  sets_mconn_t *c;
  atomic_int stop;
  atomic_int moves, bad_rc, last_bad_rc;
  uint64_t rand;
} sets_mover_t;

static void *mover_main(void *arg) {
  sets_mover_t *m = arg;
  while (!atomic_load(&m->stop)) {
    int idle = 1;
    for (int i = 0; i < MOVER_CONNS; i++) {
      sets_mconn_t *c = &m->c[i];
      int where = atomic_load(&c->where);
      if (where < 0 || !(where & 1)) continue;
      idle = 0;
      int cur = where / 2;
      m->rand = m->rand * 6364136223846793005ull + 1442695040888963407ull;
      int next =
          (cur + 1 + (int)((m->rand >> 33) % (MOVER_SETS - 1))) % MOVER_SETS;
      atomic_store(&c->where, 2 * next);
      int rc =
          taxi_reactor_move(taxi_lf_sets_reactor(m->s, (unsigned)cur), &c->h,
                            taxi_lf_sets_reactor(m->s, (unsigned)next));
      if (rc == 0) {
        atomic_fetch_add(&m->moves, 1);
      } else {
        atomic_fetch_add(&m->bad_rc, 1);
        atomic_store(&m->last_bad_rc, rc);
      }
    }
    if (idle) util_sleep_ms(1);
  }
  return NULL;
}

static void test_move_during_traffic(void) {
  taxi_lf_sets_t *s = sets_make(MOVER_SETS, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(MOVER_CONNS, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    mconn_init(&c[i], &t, i);
    atomic_store(&c[i].where, (int)(2 * (i % MOVER_SETS)));
    CU_ASSERT_EQUAL_FATAL(
        taxi_reactor_register(taxi_lf_sets_reactor(s, i % MOVER_SETS),
                              c[i].sv[0], &c[i].h, TAXI_EV_READ),
        0);
  }
  sets_mover_t m;
  memset(&m, 0, sizeof m);
  m.s = s;
  m.c = c;
  m.rand = 0x5e75;
  atomic_init(&m.stop, 0);
  atomic_init(&m.moves, 0);
  atomic_init(&m.bad_rc, 0);
  atomic_init(&m.last_bad_rc, 0);
  pthread_t tid;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&tid, NULL, mover_main, &m), 0);

  int echoed = 0, failed = 0;
  for (uint32_t k = 0; k < MOVER_ROUNDS && !failed; k++) {
    for (uint32_t i = 0; i < MOVER_CONNS; i++)
      if (msg_send(c[i].sv[1], i, k) != 0) failed++;
    for (uint32_t i = 0; i < MOVER_CONNS; i++) {
      int rc = msg_expect(c[i].sv[1], i, k);
      if (rc == 0) {
        echoed++;
      } else {
        if (!failed)
          printf("\n    connection %u, message %u: %s\n", i, k,
                 rc == -2 ? "wrong echo" : "no echo");
        failed++;
      }
    }
  }
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(echoed, MOVER_CONNS * MOVER_ROUNDS);
  /* Each connection's first hook ran on its first set: it is moved at
   * least once whatever the scheduling. */
  CU_ASSERT(wait_count(&m.moves, MOVER_CONNS));
  atomic_store(&m.stop, 1);
  pthread_join(tid, NULL);
  CU_ASSERT_EQUAL(atomic_load(&m.bad_rc), 0);
  if (atomic_load(&m.bad_rc))
    printf("\n    %d moves failed, the last with %d (%s)\n",
           atomic_load(&m.bad_rc), atomic_load(&m.last_bad_rc),
           taxi_error_name(atomic_load(&m.last_bad_rc)));
  /* Once the moves in progress are done every handler is somewhere. */
  taxi_time_t start = taxi_now();
  size_t total;
  do {
    total = 0;
    for (unsigned k = 0; k < MOVER_SETS; k++)
      total += sets_handles(taxi_lf_sets_reactor(s, k));
    if (total == MOVER_CONNS) break;
    util_sleep_ms(1);
  } while (util_elapsed_ms(start) < SETS_WAIT_MS);
  CU_ASSERT_EQUAL(total, (size_t)MOVER_CONNS);
  /* And still works where it is. */
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    CU_ASSERT_EQUAL(msg_send(c[i].sv[1], i, MOVER_ROUNDS), 0);
    CU_ASSERT_EQUAL(msg_expect(c[i].sv[1], i, MOVER_ROUNDS), 0);
  }
  sets_destroy(s);
  for (uint32_t i = 0; i < MOVER_CONNS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].errors), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].frames), MOVER_ROUNDS + 1);
    CU_ASSERT_EQUAL(atomic_load(&c[i].outside), 0);
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    mconn_close_client(&c[i]);
  }
  printf("\n    %d moves\n", atomic_load(&m.moves));
  free(c);
}

/* ---- 6. a suspended handler stays suspended on the target ---------------- */

static void test_move_suspended(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 3);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r0, &c->h), 0);
  /* Data arrives while it is suspended: nothing is dispatched. */
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 3, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  CU_ASSERT_EQUAL(sets_handles(r0), 0u);
  CU_ASSERT_EQUAL(sets_handles(r1), 1u);
  util_sleep_ms(SETS_QUIET_MS);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 0);
  /* Resuming on the old reactor finds nothing; on the new one it runs,
   * in set 1's pool, and reports the data that came meanwhile. */
  CU_ASSERT_EQUAL(taxi_reactor_resume(r0, &c->h), TAXI_ENOENT);
  util_sleep_ms(SETS_QUIET_MS / 3);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 0);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r1, &c->h), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 3, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), 0);

  /* And the other way: suspended on r1 after traffic, moved back to r0,
   * still suspended there until resumed on r0. */
  CU_ASSERT(wait_count(&c->frames, 1));
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r1, &c->h), 0);
  /* Its hook may be on its way out: wait for the move to complete. */
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c->h, r0), 0);
  CU_ASSERT(sets_wait_handles(r0, 1));
  CU_ASSERT(sets_wait_handles(r1, 0));
  int inputs = atomic_load(&c->inputs);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 3, 1), 0);
  util_sleep_ms(SETS_QUIET_MS);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), inputs);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r0, &c->h), 0);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 3, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->last_set), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  mconn_close_client(c);
  free(c);
}

/* ---- deferred moves asked from another thread ---------------------------- */

/* The hook is blocked: the move is deferred (0), a second one is refused
 * (EBUSY), and the first completes when the hook returns. */
static void test_move_deferred_pending(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  taxi_reactor_t *r2 = taxi_lf_sets_reactor(s, 2);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 5);
  c->gate = 1;
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 5, 0), 0);
  CU_ASSERT_FATAL(wait_count(&t.gate_entered, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  /* Deferred: still on r0 while the hook runs. */
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r2), TAXI_EBUSY);
  atomic_store(&t.gate_open, 1);
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 5, 0), 0);
  CU_ASSERT(sets_wait_handles(r1, 1));
  CU_ASSERT(sets_wait_handles(r0, 0));
  CU_ASSERT_EQUAL(sets_handles(r2), 0u);
  CU_ASSERT_EQUAL(atomic_load(&t.gate_timeouts), 0);
  for (uint32_t k = 1; k <= 3; k++) {
    CU_ASSERT_EQUAL(msg_send(c->sv[1], 5, k), 0);
    CU_ASSERT_EQUAL(msg_expect(c->sv[1], 5, k), 0);
    CU_ASSERT_EQUAL(atomic_load(&c->last_set), 1);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[0]), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->on_set[2]), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->errors), 0);
  mconn_close_client(c);
  free(c);
}

/* A hook returning -1 removes its handler: the deferred move is cancelled
 * and the close hook runs once; the target never gets it. */
static void test_move_deferred_removed(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 6);
  c->gate = 1;
  c->hook_ret = -1;
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(msg_send(c->sv[1], 6, 0), 0);
  CU_ASSERT_FATAL(wait_count(&t.gate_entered, 1));
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, r1), 0);
  atomic_store(&t.gate_open, 1);
  CU_ASSERT(wait_count(&c->closes, 1));
  CU_ASSERT(sets_wait_handles(r0, 0));
  util_sleep_ms(SETS_QUIET_MS / 3);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c->h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r0, &c->h), TAXI_ENOENT);
  /* The echo went out before the hook returned; then the close hook
   * closed the handler's end. */
  CU_ASSERT_EQUAL(msg_expect(c->sv[1], 6, 0), 0);
  char byte;
  CU_ASSERT_EQUAL(recv(c->sv[1], &byte, 1, 0), 0);
  sets_destroy(s);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  mconn_close_client(c);
  free(c);
}

/* ---- 7. bad input -------------------------------------------------------- */

static void test_move_bad_input(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  taxi_reactor_t *r1 = taxi_lf_sets_reactor(s, 1);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(3, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(&c[0], &t, 0);
  mconn_init(&c[1], &t, 1);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c[0].sv[0], &c[0].h, TAXI_EV_READ), 0);

  CU_ASSERT_EQUAL(taxi_reactor_move(NULL, &c[0].h, r1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, NULL, r1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[0].h, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[0].h, r0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_move(NULL, NULL, NULL), TAXI_EINVAL);
  /* Not registered with `from`: never registered, or on the other one. */
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c[1].h, r1), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[0].h, r0), TAXI_ENOENT);
  /* None of that disturbed it. */
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(r1), 0u);
  CU_ASSERT_EQUAL(msg_send(c[0].sv[1], 0, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c[0].sv[1], 0, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[0].last_set), 0);

  /* A handler with a timer only (no handle) has nothing to move. */
  taxi_timer_t tm1;
  taxi_timer_init(&tm1);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r1, &tm1, &c[1].h,
                                        3600 * TAXI_NSEC_PER_SEC, 0, NULL),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[1].h, r0), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r1, &tm1), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r1, &c[1].h), 0);
  CU_ASSERT(wait_count(&c[1].closes, 1));

  /* A handler with a scheduled timer: EBUSY; it stays, and so does the
   * timer, which still fires (in set 1's pool). */
  mconn_init(&c[2], &t, 2);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r1, c[2].sv[0], &c[2].h, TAXI_EV_READ), 0);
  taxi_timer_t tm;
  taxi_timer_init(&tm);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r1, &tm, &c[2].h,
                                        100 * TAXI_NSEC_PER_MSEC, 0, NULL),
                  0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r1, &c[2].h, r0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(sets_handles(r1), 1u);
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT(wait_count(&c[2].timeouts, 1));
  CU_ASSERT_EQUAL(atomic_load(&c[2].timeout_set), 1);
  CU_ASSERT_EQUAL(msg_send(c[2].sv[1], 2, 0), 0);
  CU_ASSERT_EQUAL(msg_expect(c[2].sv[1], 2, 0), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].last_set), 1);
  /* Once the one-shot timer is done the handler may move (the timer's
   * bookkeeping ends just after its hook: retry briefly on EBUSY). */
  int rc;
  taxi_time_t start = taxi_now();
  while ((rc = taxi_reactor_move(r1, &c[2].h, r0)) == TAXI_EBUSY &&
         util_elapsed_ms(start) < SETS_WAIT_MS)
    util_sleep_ms(1);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT(sets_wait_handles(r0, 2));
  CU_ASSERT_EQUAL(msg_send(c[2].sv[1], 2, 1), 0);
  CU_ASSERT_EQUAL(msg_expect(c[2].sv[1], 2, 1), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].last_set), 0);
  CU_ASSERT_EQUAL(atomic_load(&c[2].timeouts), 1);

  sets_destroy(s);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(atomic_load(&c[i].closes), 1);
    CU_ASSERT_EQUAL(atomic_load(&c[i].errors), 0);
    mconn_close_client(&c[i]);
  }
  free(c);
}

/* A target whose backend cannot watch EXCEPT refuses the move. */
static void test_move_except_unsupported(void) {
  const char *lacking = NULL;
  size_t n = taxi_backend_count();
  for (size_t i = 0; i < n && !lacking; i++) {
    taxi_backend_info_t info;
    if (taxi_backend_info(&info, i) == 0 && info.available &&
        !(info.caps & TAXI_CAP_EXCEPT))
      lacking = info.name;
  }
  taxi_lf_sets_t *s = sets_make(1, 1);
  taxi_reactor_t *r0 = taxi_lf_sets_reactor(s, 0);
  if (!(taxi_reactor_caps(r0) & TAXI_CAP_EXCEPT) || !lacking) {
    printf("\n    note: skipped: %s\n",
           !(taxi_reactor_caps(r0) & TAXI_CAP_EXCEPT)
               ? "this backend cannot watch EXCEPT itself"
               : "no backend without TAXI_CAP_EXCEPT is compiled in and "
                 "works here");
    sets_destroy(s);
    return;
  }
  taxi_reactor_t *rx = NULL;
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&rx, lacking), 0);
  sets_mtest_t t;
  mtest_init(&t, s);
  sets_mconn_t *c = calloc(1, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  mconn_init(c, &t, 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_reactor_register(r0, c->sv[0], &c->h, TAXI_EV_READ | TAXI_EV_EXCEPT),
      0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, rx), TAXI_ENOTSUP);
  CU_ASSERT_EQUAL(sets_handles(r0), 1u);
  CU_ASSERT_EQUAL(sets_handles(rx), 0u);
  /* Watching READ only, it may go. */
  CU_ASSERT_EQUAL(taxi_reactor_modify(r0, &c->h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_move(r0, &c->h, rx), 0);
  CU_ASSERT_EQUAL(sets_handles(rx), 1u);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(rx), 0);
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  sets_destroy(s);
  mconn_close_client(c);
  free(c);
}

static void test_sets_bad_input(void) {
  taxi_lf_sets_options_t o = TAXI_LF_SETS_OPTIONS_INIT;
  o.backend = sets_backend;
  taxi_lf_sets_t *s = (taxi_lf_sets_t *)&o; /* must be reset to NULL */
  o.sets = TAXI_LF_SETS_MAX + 1;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  o.sets = 1;
  o.threads_per_set = TAXI_LF_MAX_THREADS + 1;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  o.threads_per_set = 1;
  taxi_lf_options_t po = TAXI_LF_OPTIONS_INIT;
  po.promotion = (taxi_promotion_t)99;
  o.pool = &po;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  po.promotion = TAXI_PROMOTE_LIFO;
  CU_ASSERT_EQUAL(taxi_lf_sets_create(NULL, &o), TAXI_EINVAL);
  o.backend = "no-such-backend";
  CU_ASSERT_EQUAL(taxi_lf_sets_create(&s, &o), TAXI_ENOBACKEND);
  CU_ASSERT_PTR_NULL(s);

  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_count(NULL), 0u);
  CU_ASSERT_PTR_NULL(taxi_lf_sets_reactor(NULL, 0));
  CU_ASSERT_PTR_NULL(taxi_lf_sets_pool(NULL, 0));
  CU_ASSERT_EQUAL(taxi_lf_sets_index(NULL, NULL), -1);
  taxi_handler_t h;
  taxi_handler_init(&h, &conn_ops);
  CU_ASSERT_EQUAL(taxi_lf_sets_register(NULL, 0, &h, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(NULL, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                                      make_acceptor, NULL, NULL),
                  TAXI_EINVAL);

  s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  unsigned port = 4242;
  CU_ASSERT_EQUAL(taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                                      NULL, srv, &port),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_lf_sets_listen(s, "127.0.0.1", 0, 7, make_acceptor, srv, &port),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_lf_sets_listen(s, "127.0.0.1", 0, -1, make_acceptor, srv, &port),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(port, 4242u); /* not reported on failure */
  CU_ASSERT_EQUAL(atomic_load(&srv->made), 0);
  for (unsigned i = 0; i < 2; i++)
    CU_ASSERT_EQUAL(sets_handles(taxi_lf_sets_reactor(s, i)), 0u);
  sets_destroy(s);
  free(srv);
}

/* An acceptor maker that gives up leaves no listener behind. */
static taxi_handler_t *make_acceptor_second_fails(unsigned set,
                                                  taxi_handle_t listener,
                                                  void *arg) {
  sets_server_t *srv = arg;
  if (atomic_load(&srv->made) >= 1) {
    atomic_fetch_add(&srv->made, 1);
    return NULL;
  }
  return make_acceptor(set, listener, arg);
}

static void test_listen_make_fails(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, TAXI_BALANCE_KERNEL);
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor_second_fails, srv, NULL);
  if (atomic_load(&srv->made) < 2) {
    /* One listener only (acceptor balancing): the maker did not fail. */
    CU_ASSERT_EQUAL(rc, TAXI_BALANCE_ACCEPTOR);
    printf(
        "\n    note: one listener only; maker failure on the second "
        "listener not reachable here\n");
  } else {
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
    /* The first acceptor was removed: its close hook closed its listener. */
    CU_ASSERT(wait_count(&srv->listener_closes, 1));
    for (unsigned i = 0; i < 2; i++)
      CU_ASSERT(sets_wait_handles(taxi_lf_sets_reactor(s, i), 0));
  }
  sets_destroy(s);
  if (atomic_load(&srv->made) >= 2)
    CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 1);
  free(srv);
}

/* Stop twice: the second says so; wait returns at once after a stop and
 * runs out of time before one; destroy still works. */
static void test_sets_shutdown(void) {
  taxi_lf_sets_t *s = sets_make(2, 2);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 0), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 20), TAXI_ETIMEDOUT);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, -1), 0);
  CU_ASSERT_EQUAL(taxi_lf_sets_wait(s, 0), 0);
  for (unsigned i = 0; i < 2; i++) {
    taxi_lf_stats_t st;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL(taxi_lf_stats(taxi_lf_sets_pool(s, i), &st), 0);
    CU_ASSERT_EQUAL(st.threads, 0u);
  }
  CU_ASSERT_EQUAL(taxi_lf_sets_stop(s), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_lf_sets_destroy(s), 0);
}

/* Destroy from a hook of one of the sets: EBUSY. */
typedef struct sets_self {
  taxi_handler_t h;
  int sv[2];
  taxi_lf_sets_t *s;
  atomic_int rc, done;
} sets_self_t;

static int self_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  sets_self_t *x = TAXI_CONTAINER_OF(h, sets_self_t, h);
  (void)ev;
  util_drain(fd);
  atomic_store(&x->rc, taxi_lf_sets_destroy(x->s));
  atomic_store(&x->done, 1);
  return 0;
}

static const taxi_handler_ops_t self_ops = {.input = self_input};

static void test_destroy_from_hook(void) {
  taxi_lf_sets_t *s = sets_make(2, 1);
  sets_self_t x;
  memset(&x, 0, sizeof x);
  sets_pair(x.sv);
  x.s = s;
  atomic_init(&x.rc, 12345);
  atomic_init(&x.done, 0);
  taxi_handler_init(&x.h, &self_ops);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(taxi_lf_sets_reactor(s, 1),
                                              x.sv[0], &x.h, TAXI_EV_READ),
                        0);
  CU_ASSERT_EQUAL(util_write_byte(x.sv[1]), 1);
  CU_ASSERT(wait_count(&x.done, 1));
  CU_ASSERT_EQUAL(atomic_load(&x.rc), TAXI_EBUSY);
  sets_destroy(s);
  close(x.sv[0]);
  close(x.sv[1]);
}

/* ---- 8. close hooks at destruction --------------------------------------- */

#define DESTROY_CONNS 24

static void test_destroy_closes(void) {
  taxi_lf_sets_t *s = sets_make(3, 2);
  sets_server_t *srv = server_new(s);
  atomic_store(&srv->balance, -1);
  unsigned port = 0;
  int rc = taxi_lf_sets_listen(s, "127.0.0.1", 0, TAXI_BALANCE_AUTO,
                               make_acceptor, srv, &port);
  CU_ASSERT_FATAL(rc == TAXI_BALANCE_KERNEL || rc == TAXI_BALANCE_ACCEPTOR);
  atomic_store(&srv->balance, rc);
  int listeners = rc == TAXI_BALANCE_KERNEL ? 3 : 1;
  CU_ASSERT_EQUAL(atomic_load(&srv->made), listeners);

  int fds[DESTROY_CONNS];
  CU_ASSERT_EQUAL(clients_echo(port, fds, DESTROY_CONNS), DESTROY_CONNS);
  CU_ASSERT(wait_count(&srv->registered, DESTROY_CONNS));
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), 0);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), 0);

  sets_destroy(s); /* the connections are open */
  CU_ASSERT_EQUAL(atomic_load(&srv->closes), DESTROY_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&srv->listener_closes), listeners);
  int n = atomic_load(&srv->nconns);
  CU_ASSERT_EQUAL(n, DESTROY_CONNS);
  for (int i = 0; i < n && i < SETS_MAX_CONNS; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->conns[i].closes), 1);
  for (int i = 0; i < listeners; i++)
    CU_ASSERT_EQUAL(atomic_load(&srv->acc[i].closes), 1);
  /* The close hooks closed the server's ends: the clients see the end. */
  int eofs = 0;
  for (int i = 0; i < DESTROY_CONNS; i++) {
    char b;
    if (fds[i] >= 0 && recv(fds[i], &b, 1, 0) == 0) eofs++;
  }
  CU_ASSERT_EQUAL(eofs, DESTROY_CONNS);
  /* And the listeners are gone: nobody accepts on the port any more. */
  int late = client_connect(port);
  if (late >= 0) {
    /* A free port in the ephemeral range can connect to itself (TCP
     * simultaneous open): that is not a listener. */
    struct sockaddr_in self;
    socklen_t len = sizeof self;
    if (getsockname(late, (struct sockaddr *)&self, &len) == 0 &&
        ntohs(self.sin_port) == port) {
      close(late);
      late = -1;
    }
  }
  CU_ASSERT(late < 0);
  if (late >= 0) close(late);
  clients_close(fds, DESTROY_CONNS);
  free(srv);
}

/* ---- the suite ----------------------------------------------------------- */

static CU_TestInfo sets_tests[] = {
    {"create: count, reactors, pools, index", test_create_accessors},
    {"create: zeroed options give a set per processor", test_create_defaults},
    {"listen: kernel balancing spreads 64 connections", test_kernel_balance},
    {"listen: host NULL listens on every address", test_listen_any_host},
    {"listen: the acceptor spreads 60 connections evenly",
     test_acceptor_balance},
    {"register: the least loaded set first", test_register_least_loaded},
    {"move: an idle handler, from another thread", test_move_idle},
    {"move: from the handler's own hook, 1000 messages", test_move_from_hook},
    {"move: from another thread during traffic", test_move_during_traffic},
    {"move: a suspended handler stays suspended", test_move_suspended},
    {"move: deferred while the hook runs; a second is EBUSY",
     test_move_deferred_pending},
    {"move: removal cancels a deferred move", test_move_deferred_removed},
    {"move: bad input, timers", test_move_bad_input},
    {"move: EXCEPT to a backend without it", test_move_except_unsupported},
    {"sets: bad input", test_sets_bad_input},
    {"listen: an acceptor maker that gives up", test_listen_make_fails},
    {"sets: stop twice, wait", test_sets_shutdown},
    {"sets: destroy from a hook is EBUSY", test_destroy_from_hook},
    {"destroy: close hooks run once, listeners closed", test_destroy_closes},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t *pools_sets_suite(const char *backend) {
  static taxi_test_suite_t suite;
  static char name[96];
  sets_backend = backend;
  snprintf(name, sizeof name, "pools[%s]: sets", backend);
  suite.name = name;
  suite.tests = sets_tests;
  suite.timeout_s = 120;
  return &suite;
}
