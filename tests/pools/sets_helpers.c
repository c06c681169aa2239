/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/sets_helpers.c - the fixtures of the handle sets' tests:
 * clients (plain blocking sockets with 5 s send and receive time
 * limits), a TCP echo server over the sets, movable handlers on
 * socketpairs (see sets_helpers.h).
 */
#define _GNU_SOURCE 1

#include "sets_helpers.h"

#include "../net_helpers.h"

const char *sets_backend;

/* ---- small helpers ------------------------------------------------------- */

taxi_lf_sets_t *sets_make(unsigned n, unsigned threads) {
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

size_t sets_handles(taxi_reactor_t *r) {
  taxi_reactor_stats_t st;
  memset(&st, 0, sizeof st);
  int rc = taxi_reactor_stats(r, &st);
  CU_ASSERT_EQUAL(rc, 0);
  return st.handles;
}

/* Wait (bounded) until reactor r has `want` handles; 1 when it has. */
int sets_wait_handles(taxi_reactor_t *r, size_t want) {
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

void sets_destroy(taxi_lf_sets_t *s) {
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
int client_connect(unsigned port) {
  return net_connect_loopback((int)port, 0, SETS_CLIENT_TIMEOUT_S, 0);
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
void sets_pair(int sv[2]) {
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

int msg_send(int fd, uint32_t conn, uint32_t seq) {
  sets_msg_t m = {conn, seq};
  return net_send_all(fd, &m, sizeof m);
}

/* 0 when the echo of (conn, seq) came back. */
int msg_expect(int fd, uint32_t conn, uint32_t seq) {
  sets_msg_t m;
  if (net_recv_all(fd, &m, sizeof m) != 0) return -1;
  return m.conn == conn && m.seq == seq ? 0 : -2;
}

/* ---- a TCP echo server over the sets ------------------------------------- */

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

const taxi_handler_ops_t conn_ops = {.input = conn_input, .close = conn_close};

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

taxi_handler_t *make_acceptor(unsigned set, taxi_handle_t listener, void *arg) {
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

sets_server_t *server_new(taxi_lf_sets_t *s) {
  sets_server_t *srv = calloc(1, sizeof *srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
  srv->s = s;
  return srv;
}

/* Wait (bounded) until *counter >= goal. */
int wait_count(atomic_int *counter, int goal) {
  return util_wait_flag(counter, goal, SETS_WAIT_MS);
}

/* Connect n clients to port and check that each echoes a message of its
 * own.  Returns how many echoed; fds[] gets the clients (-1 for failures). */
int clients_echo(unsigned port, int *fds, int n) {
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
    if (net_send_all(fds[i], out, (size_t)len) == 0 &&
        net_recv_all(fds[i], in, (size_t)len) == 0 && memcmp(in, out, len) == 0)
      ok++;
    else
      printf("\n    client %d: no correct echo (%s)\n", i, strerror(errno));
  }
  return ok;
}

void clients_close(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* ---- movable handlers on socketpairs ------------------------------------- */

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

void mtest_init(sets_mtest_t *t, taxi_lf_sets_t *s) {
  t->s = s;
  atomic_init(&t->gate_entered, 0);
  atomic_init(&t->gate_open, 0);
  atomic_init(&t->gate_timeouts, 0);
}

/* Zero c, give it a socketpair, init its handler (not registered). */
void mconn_init(sets_mconn_t *c, sets_mtest_t *t, uint32_t index) {
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
void mconn_close_client(sets_mconn_t *c) {
  if (c->sv[1] >= 0) close(c->sv[1]);
  c->sv[1] = -1;
}
