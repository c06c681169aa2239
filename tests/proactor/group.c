/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/group.c - a group of proactors, one per thread
 * (taxi/proactor_group.h), and moving handles between proactors
 * (taxi_proactor_move):
 *   - groups of 1, 2 and 4 echo over loopback TCP, the connections spread
 *     by taxi_proactor_group_next (round robin and least loaded) and moved
 *     there from the listener's proactor; every byte is checked, and every
 *     handler of a connection runs in its proactor's thread; stopped from
 *     a completion handler and from another thread;
 *   - a handler in proactor 0's thread starts a read and a write on a
 *     handle of proactor 1: they complete in proactor 1's thread;
 *   - an idle handle moves (from a handler of either proactor) and then
 *     completes in the new proactor's thread; the refusals of a move;
 *   - taxi_proactor_stats().handles after attach, close and detach.
 * The group's own API is tested in group_api.c.
 * The group runs in a bounded thread (pt_bounded), so a lost stop fails
 * the suite instead of hanging it.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define GR_MAX 8      /* proactors in the largest group tested */
#define GR_CONNS 16   /* connections per echo run */
#define GR_CHUNK 4096 /* bytes per client write, and the server's buffer */

taxi_proactor_group_t *gr_group(unsigned count, taxi_group_spread_t s) {
  taxi_proactor_options_t po = TAXI_PROACTOR_OPTIONS_INIT;
  po.backend = pt_backend;
  po.flags = util_proactor_flags; /* the group adds TAXI_PROACTOR_ONE_THREAD */
  taxi_proactor_group_options_t o = TAXI_PROACTOR_GROUP_OPTIONS_INIT;
  o.count = count;
  o.spread = s;
  o.proactor = &po;
  taxi_proactor_group_t *g = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_group_create(&g, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_group_count(g), count);
  return g;
}

static int gr_run_fn(void *g) { return taxi_proactor_group_run(g); }

int gr_run(taxi_proactor_group_t *g) {
  return pt_bounded(gr_run_fn, g, "taxi_proactor_group_run");
}

/* ---- which thread dispatches each proactor ------------------------------ */

/* A post to proactor i records the thread that dispatches it. */
typedef struct gr_who {
  taxi_op_t op;
  pthread_t thread;
  atomic_int known;
} gr_who_t;

static void gr_on_who(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_who_t *w = act;
  (void)op;
  (void)bytes;
  CU_ASSERT_EQUAL(status, 0);
  w->thread = pthread_self();
  atomic_store(&w->known, 1);
}

static void gr_ask_who(taxi_proactor_group_t *g, gr_who_t *who) {
  for (unsigned i = 0; i < taxi_proactor_group_count(g); i++) {
    taxi_op_init(&who[i].op);
    atomic_init(&who[i].known, 0);
    CU_ASSERT_EQUAL(taxi_proactor_post(taxi_proactor_group_at(g, i), &who[i].op,
                                       gr_on_who, &who[i]),
                    0);
  }
}

/* Where each proactor of g ran: known, and a thread of its own each. */
static void gr_check_who(taxi_proactor_group_t *g, gr_who_t *who) {
  unsigned n = taxi_proactor_group_count(g);
  for (unsigned i = 0; i < n; i++) {
    CU_ASSERT_EQUAL(atomic_load(&who[i].known), 1);
    for (unsigned j = 0; j < i; j++)
      CU_ASSERT(!pthread_equal(who[i].thread, who[j].thread));
  }
}

static unsigned gr_index(taxi_proactor_group_t *g, taxi_proactor_t *p) {
  for (unsigned i = 0; i < taxi_proactor_group_count(g); i++)
    if (taxi_proactor_group_at(g, i) == p) return i;
  return GR_MAX;
}

/* Whether this backend moves handles at all (IOCP cannot). */
static int gr_moves(void) {
  if (!pt_backend_is("iocp")) return 1;
  printf("(iocp: handles cannot move) ");
  return 0;
}

/* ---- the echo ----------------------------------------------------------- */

typedef struct gr_echo gr_echo_t;

typedef struct gr_conn {
  gr_echo_t *e;
  taxi_proactor_t *q;
  unsigned index; /* of q in the group */
  taxi_handle_t h;
  taxi_op_t rop, wop;
  unsigned char buf[GR_CHUNK];
  size_t echoed;
  pthread_t thread; /* where its first handler ran */
  int calls;
  int wrong_thread;
} gr_conn_t;

struct gr_echo {
  taxi_proactor_group_t *g;
  unsigned n;
  int stop_in_handler;
  size_t bytes; /* per connection */
  int lfd, port;
  taxi_op_t aop;
  gr_conn_t conns[GR_CONNS];
  int per_proactor[GR_MAX]; /* written by the accept handler only */
  atomic_int accepted, closed, errors;
  atomic_int client_failed;
};

static void gr_conn_note(gr_conn_t *c) {
  pthread_t self = pthread_self();
  if (c->calls++ == 0)
    c->thread = self;
  else if (!pthread_equal(self, c->thread))
    c->wrong_thread++;
}

static void gr_conn_end(gr_conn_t *c) {
  gr_echo_t *e = c->e;
  if (taxi_proactor_close(c->q, c->h) != 0) atomic_fetch_add(&e->errors, 1);
  if (atomic_fetch_add(&e->closed, 1) + 1 == GR_CONNS && e->stop_in_handler) {
    CU_ASSERT_EQUAL(taxi_proactor_group_stop(e->g), 0);
  }
}

static void gr_on_read(taxi_op_t *op, int status, size_t bytes, void *act);

static void gr_on_write(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_conn_t *c = act;
  (void)op;
  gr_conn_note(c);
  if (status != 0) {
    atomic_fetch_add(&c->e->errors, 1);
    gr_conn_end(c);
    return;
  }
  c->echoed += bytes;
  if (taxi_proactor_read(c->q, &c->rop, c->h, c->buf, sizeof c->buf, 0,
                         gr_on_read, c) != 0) {
    atomic_fetch_add(&c->e->errors, 1);
    gr_conn_end(c);
  }
}

static void gr_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_conn_t *c = act;
  (void)op;
  gr_conn_note(c);
  if (status != 0) {
    if (status != TAXI_EEOF) atomic_fetch_add(&c->e->errors, 1);
    gr_conn_end(c);
    return;
  }
  taxi_buf_t b = {c->buf, bytes};
  if (taxi_proactor_write(c->q, &c->wop, c->h, &b, 1, gr_on_write, c) != 0) {
    atomic_fetch_add(&c->e->errors, 1);
    gr_conn_end(c);
  }
}

/* In proactor 0's thread: spread the connection by next(), move it there
 * and start reading on it from here (a cross-thread start when it went to
 * another proactor). */
static void gr_on_accept(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_echo_t *e = act;
  (void)bytes;
  if (status != 0) {
    if (status != TAXI_ECANCELED) atomic_fetch_add(&e->errors, 1);
    return;
  }
  taxi_proactor_t *p0 = taxi_proactor_group_at(e->g, 0);
  taxi_handle_t h = op->accepted;
  int k = atomic_fetch_add(&e->accepted, 1);
  if (k >= GR_CONNS) {
    atomic_fetch_add(&e->errors, 1);
    taxi_proactor_close(p0, h);
    return;
  }
  gr_conn_t *c = &e->conns[k];
  c->e = e;
  c->h = h;
  c->q = taxi_proactor_group_next(e->g);
  c->index = gr_index(e->g, c->q);
  if (c->index >= e->n) {
    atomic_fetch_add(&e->errors, 1);
    c->q = p0;
    c->index = 0;
  }
  taxi_op_init(&c->rop);
  taxi_op_init(&c->wop);
  if (c->q != p0) {
    int rc = taxi_proactor_move(p0, h, c->q);
    if (rc == TAXI_ENOTSUP) { /* IOCP: it stays where it was accepted */
      c->q = p0;
      c->index = 0;
    } else if (rc != 0) {
      printf("\n    move: %s\n", taxi_error_name(rc));
      atomic_fetch_add(&e->errors, 1);
      c->q = p0;
      c->index = 0;
    }
  }
  e->per_proactor[c->index]++;
  if (taxi_proactor_read(c->q, &c->rop, h, c->buf, sizeof c->buf, 0, gr_on_read,
                         c) != 0) {
    atomic_fetch_add(&e->errors, 1);
    gr_conn_end(c);
  }
}

static int gr_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      util_set_nonblock(fd) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The clients: every connection open first (so that the spread sees them
 * all at once), then each echoes its bytes chunk by chunk, every byte
 * compared; then the stop, unless a handler stops the group. */
static void gr_clients(void *arg) {
  gr_echo_t *e = arg;
  int fds[GR_CONNS];
  unsigned char out[GR_CHUNK], back[GR_CHUNK];
  int failed = 0;
  for (int i = 0; i < GR_CONNS; i++) {
    fds[i] = gr_connect(e->port);
    if (fds[i] < 0) failed++;
  }
  for (int i = 0; i < GR_CONNS && !failed; i++) {
    for (size_t off = 0; off < e->bytes && !failed; off += GR_CHUNK) {
      pt_fill(out, sizeof out, (uint64_t)i * 100000 + off);
      size_t got = 0;
      if (pt_peer_write(fds[i], out, sizeof out) != 0 ||
          pt_peer_read(fds[i], back, sizeof back, &got) != 0 ||
          memcmp(out, back, sizeof out) != 0)
        failed++;
    }
  }
  for (int i = 0; i < GR_CONNS; i++)
    if (fds[i] >= 0) close(fds[i]);
  if (failed) atomic_store(&e->client_failed, 1);
  /* The server closes each connection at its EOF; a missing close ends
   * the run here all the same (and fails the test). */
  if (!util_wait_flag(&e->closed, GR_CONNS, pt_wait_ms())) {
    atomic_store(&e->client_failed, 1);
    taxi_proactor_group_stop(e->g);
  } else if (!e->stop_in_handler || failed) {
    taxi_proactor_group_stop(e->g);
  }
}

static void gr_echo(unsigned n, taxi_group_spread_t spread,
                    int stop_in_handler) {
  static gr_echo_t e;
  memset(&e, 0, sizeof e);
  e.n = n;
  e.stop_in_handler = stop_in_handler;
  e.bytes = (pt_small() ? 4 : 16) * (size_t)GR_CHUNK;
  e.g = gr_group(n, spread);
  gr_who_t who[GR_MAX];
  gr_ask_who(e.g, who);
  taxi_proactor_t *p0 = taxi_proactor_group_at(e.g, 0);
  e.lfd = util_tcp_listener(&e.port);
  CU_ASSERT_FATAL(e.lfd >= 0);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_attach(p0, e.lfd), 0);
  taxi_op_init(&e.aop);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_accept(p0, &e.aop, e.lfd, TAXI_ACCEPT_MULTISHOT,
                           gr_on_accept, &e),
      0);
  pt_thread_t client;
  pt_thread_start(&client, gr_clients, &e);
  CU_ASSERT_EQUAL(gr_run(e.g), TAXI_ESTOPPED);
  pt_thread_join(&client, 2, "group echo clients");

  CU_ASSERT_EQUAL(atomic_load(&e.client_failed), 0);
  CU_ASSERT_EQUAL(atomic_load(&e.errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), GR_CONNS);
  CU_ASSERT_EQUAL(atomic_load(&e.closed), GR_CONNS);
  gr_check_who(e.g, who);
  for (int i = 0; i < GR_CONNS; i++) {
    gr_conn_t *c = &e.conns[i];
    CU_ASSERT_EQUAL(c->echoed, e.bytes);
    CU_ASSERT_EQUAL(c->wrong_thread, 0);
    CU_ASSERT(c->calls > 0);
    if (c->calls > 0 && c->index < n) {
      CU_ASSERT(pthread_equal(c->thread, who[c->index].thread));
    }
  }
  for (unsigned i = 0; i < n && gr_moves(); i++) {
    if (spread == TAXI_SPREAD_ROUND_ROBIN) {
      CU_ASSERT_EQUAL(e.per_proactor[i], GR_CONNS / (int)n);
    } else if (i > 0) {
      /* Proactor 0 holds the listener, and the new connection while next()
       * chooses, so it may rank last all along; the others are chosen. */
      CU_ASSERT(e.per_proactor[i] >= 1);
    }
  }
  /* Destroy cancels the multishot accept and closes the listener. */
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(e.g), 0);
}

static void test_echo_1(void) {
  gr_echo(1, TAXI_SPREAD_ROUND_ROBIN, 1);
  gr_echo(1, TAXI_SPREAD_LEAST_LOADED, 0);
}
static void test_echo_2(void) {
  gr_echo(2, TAXI_SPREAD_ROUND_ROBIN, 1);
  gr_echo(2, TAXI_SPREAD_LEAST_LOADED, 0);
  gr_echo(2, TAXI_SPREAD_LEAST_LOADED, 1);
}
static void test_echo_4(void) {
  gr_echo(4, TAXI_SPREAD_ROUND_ROBIN, 0);
  gr_echo(4, TAXI_SPREAD_ROUND_ROBIN, 1);
  gr_echo(4, TAXI_SPREAD_LEAST_LOADED, 1);
}
static void test_echo_8(void) {
  gr_echo(8, TAXI_SPREAD_ROUND_ROBIN, 1);
  gr_echo(8, TAXI_SPREAD_LEAST_LOADED, 0);
}

/* ---- starting an operation on another thread's handle ------------------- */

typedef struct gr_cross {
  taxi_proactor_group_t *g;
  int sv[2];
  taxi_op_t post, rop, wop;
  char in, out;
  pthread_t starter, read_thread, write_thread;
  int read_status, write_status, start_rc;
  atomic_int done;
} gr_cross_t;

static void gr_cross_end(gr_cross_t *x) {
  if (atomic_fetch_add(&x->done, 1) + 1 == 2) taxi_proactor_group_stop(x->g);
}

static void gr_cross_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_cross_t *x = act;
  (void)op;
  (void)bytes;
  x->read_thread = pthread_self();
  x->read_status = status;
  gr_cross_end(x);
}

static void gr_cross_write(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_cross_t *x = act;
  (void)op;
  (void)bytes;
  x->write_thread = pthread_self();
  x->write_status = status;
  gr_cross_end(x);
}

/* In proactor 0's thread. */
static void gr_cross_start(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_cross_t *x = act;
  (void)op;
  (void)status;
  (void)bytes;
  x->starter = pthread_self();
  taxi_proactor_t *p1 = taxi_proactor_group_at(x->g, 1);
  taxi_buf_t b = {&x->out, 1};
  int rc =
      taxi_proactor_read(p1, &x->rop, x->sv[0], &x->in, 1, 0, gr_cross_read, x);
  if (rc == 0)
    rc = taxi_proactor_write(p1, &x->wop, x->sv[0], &b, 1, gr_cross_write, x);
  if (rc == 0 && pt_peer_write(x->sv[1], "r", 1) != 0) rc = -1;
  x->start_rc = rc;
  if (rc != 0) taxi_proactor_group_stop(x->g);
}

static void test_cross_thread(void) {
  static gr_cross_t x;
  memset(&x, 0, sizeof x);
  x.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  x.out = 'w';
  gr_who_t who[2];
  gr_ask_who(x.g, who);
  pt_tcp_pair(taxi_proactor_group_at(x.g, 1), x.sv);
  taxi_op_init(&x.post);
  taxi_op_init(&x.rop);
  taxi_op_init(&x.wop);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(taxi_proactor_group_at(x.g, 0),
                                           &x.post, gr_cross_start, &x),
                        0);
  CU_ASSERT_EQUAL(gr_run(x.g), TAXI_ESTOPPED);
  gr_check_who(x.g, who);
  CU_ASSERT_EQUAL(x.start_rc, 0);
  CU_ASSERT_EQUAL(atomic_load(&x.done), 2);
  CU_ASSERT_EQUAL(x.read_status, 0);
  CU_ASSERT_EQUAL(x.write_status, 0);
  CU_ASSERT_EQUAL(x.in, 'r');
  CU_ASSERT(pthread_equal(x.starter, who[0].thread));
  CU_ASSERT(pthread_equal(x.read_thread, who[1].thread));
  CU_ASSERT(pthread_equal(x.write_thread, who[1].thread));
  char c = 0;
  CU_ASSERT_EQUAL(pt_peer_read(x.sv[1], &c, 1, NULL), 0);
  CU_ASSERT_EQUAL(c, 'w');
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(x.g), 0);
  pt_close(&x.sv[1]);
}

/* ---- moving handles ------------------------------------------------------ */

typedef struct gr_move {
  taxi_proactor_group_t *g;
  int sv[2];
  taxi_op_t post, rop;
  char in[2];
  int move_rc[2], start_rc[2], read_status[2];
  pthread_t read_thread[2];
} gr_move_t;

static void gr_move_read2(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_move_t *m = act;
  (void)op;
  (void)bytes;
  m->read_thread[1] = pthread_self();
  m->read_status[1] = status;
  taxi_proactor_group_stop(m->g);
}

/* In proactor 1's thread, the read done: move the handle back to 0 from
 * this handler (the record is idle again, so nothing is in flight). */
static void gr_move_read1(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_move_t *m = act;
  (void)op;
  (void)bytes;
  m->read_thread[0] = pthread_self();
  m->read_status[0] = status;
  taxi_proactor_t *p0 = taxi_proactor_group_at(m->g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m->g, 1);
  m->move_rc[1] = taxi_proactor_move(p1, m->sv[0], p0);
  m->start_rc[1] = taxi_proactor_read(p0, &m->rop, m->sv[0], &m->in[1], 1, 0,
                                      gr_move_read2, m);
  if (m->move_rc[1] || m->start_rc[1] || pt_peer_write(m->sv[1], "b", 1))
    taxi_proactor_group_stop(m->g);
}

/* In proactor 0's thread: move the idle handle to 1 and read there. */
static void gr_move_start(taxi_op_t *op, int status, size_t bytes, void *act) {
  gr_move_t *m = act;
  (void)op;
  (void)status;
  (void)bytes;
  taxi_proactor_t *p0 = taxi_proactor_group_at(m->g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m->g, 1);
  m->move_rc[0] = taxi_proactor_move(p0, m->sv[0], p1);
  m->start_rc[0] = taxi_proactor_read(p1, &m->rop, m->sv[0], &m->in[0], 1, 0,
                                      gr_move_read1, m);
  if (m->move_rc[0] || m->start_rc[0] || pt_peer_write(m->sv[1], "a", 1))
    taxi_proactor_group_stop(m->g);
}

static void test_move_works(void) {
  if (!gr_moves()) return;
  static gr_move_t m;
  memset(&m, 0, sizeof m);
  m.read_status[0] = m.read_status[1] = 1;
  m.g = gr_group(2, TAXI_SPREAD_ROUND_ROBIN);
  gr_who_t who[2];
  gr_ask_who(m.g, who);
  taxi_proactor_t *p0 = taxi_proactor_group_at(m.g, 0);
  taxi_proactor_t *p1 = taxi_proactor_group_at(m.g, 1);
  pt_tcp_pair(p0, m.sv);
  taxi_op_init(&m.post);
  taxi_op_init(&m.rop);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(p0, &m.post, gr_move_start, &m), 0);
  CU_ASSERT_EQUAL(gr_run(m.g), TAXI_ESTOPPED);
  gr_check_who(m.g, who);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(m.move_rc[i], 0);
    CU_ASSERT_EQUAL(m.start_rc[i], 0);
    CU_ASSERT_EQUAL(m.read_status[i], 0);
  }
  CU_ASSERT_EQUAL(m.in[0], 'a');
  CU_ASSERT_EQUAL(m.in[1], 'b');
  CU_ASSERT(pthread_equal(m.read_thread[0], who[1].thread));
  CU_ASSERT(pthread_equal(m.read_thread[1], who[0].thread));
  /* Back on 0, forgotten by 1. */
  CU_ASSERT_EQUAL(taxi_proactor_detach(p1, m.sv[0]), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_proactor_move(p1, m.sv[0], p0), TAXI_ENOENT);
  /* Closing the group closes the handle where it is now. */
  CU_ASSERT_EQUAL(taxi_proactor_group_destroy(m.g), 0);
  CU_ASSERT_EQUAL(pt_peer_read_to_eof(m.sv[1]), 0);
  pt_close(&m.sv[1]);
}

static uint64_t gr_handles(taxi_proactor_t *p) {
  taxi_proactor_stats_t st;
  memset(&st, 0xff, sizeof st);
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &st), 0);
  return st.handles;
}

/* The refusals, on two proactors dispatched by this thread. */
static void test_move_refused(void) {
  taxi_proactor_t *a = pt_proactor(), *b = pt_proactor();
  int sv[2];
  pt_pair(a, sv);
  if (!pt_backend_is("iocp")) {
    CU_ASSERT_EQUAL(taxi_proactor_move(NULL, sv[0], b), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], NULL), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_proactor_move(NULL, sv[0], NULL), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], a), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_proactor_move(a, TAXI_INVALID_HANDLE, b), TAXI_EINVAL);
    CU_ASSERT_EQUAL(taxi_proactor_move(b, sv[0], a), TAXI_ENOENT);
    CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[1], b), TAXI_ENOENT);
  }
  if (!gr_moves()) {
    CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], b), TAXI_ENOTSUP);
    pt_close(&sv[1]);
    pt_destroy(a);
    pt_destroy(b);
    return;
  }
  /* Attached to both: EEXIST, and nothing changes. */
  CU_ASSERT_EQUAL(taxi_proactor_attach(b, sv[0]), 0);
  CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], b), TAXI_EEXIST);
  CU_ASSERT_EQUAL(gr_handles(a), 1);
  CU_ASSERT_EQUAL(gr_handles(b), 1);
  CU_ASSERT_EQUAL(taxi_proactor_detach(b, sv[0]), 0);
  CU_ASSERT_EQUAL(gr_handles(b), 0);

  /* A read in flight: EBUSY, the handle stays; once it completed (here
   * cancelled), the move goes. */
  taxi_op_t rop = TAXI_OP_INIT;
  pt_done_t d;
  pt_done_init(&d);
  char c;
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(a, &rop, sv[0], &c, 1, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], b), TAXI_EBUSY);
  CU_ASSERT_EQUAL(gr_handles(a), 1);
  CU_ASSERT_EQUAL(gr_handles(b), 0);
  CU_ASSERT_EQUAL(taxi_proactor_cancel(a, &rop), 0);
  CU_ASSERT_FATAL(pt_run_done(a, &d, 1));
  CU_ASSERT_EQUAL(d.status, TAXI_ECANCELED);
  CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], b), 0);
  CU_ASSERT_EQUAL(gr_handles(a), 0);
  CU_ASSERT_EQUAL(gr_handles(b), 1);
  CU_ASSERT_EQUAL(taxi_proactor_move(a, sv[0], b), TAXI_ENOENT);

  /* It works on b, and not on a. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_read(a, &rop, sv[0], &c, 1, 0, pt_on_done, &d),
                  TAXI_ENOENT);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(b, &rop, sv[0], &c, 1, 0, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(pt_peer_write(sv[1], "m", 1), 0);
  CU_ASSERT_FATAL(pt_run_done(b, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  CU_ASSERT_EQUAL(c, 'm');
  CU_ASSERT_EQUAL(pt_settle(a, 20), 0); /* nothing for a */

  /* A write queued behind a read: busy in the other direction too. */
  pt_done_t rd, wd;
  pt_done_init(&rd);
  pt_done_init(&wd);
  taxi_op_t wop = TAXI_OP_INIT;
  taxi_buf_t wb = {"z", 1};
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_read(b, &rop, sv[0], &c, 1, 0, pt_on_done, &rd), 0);
  CU_ASSERT_EQUAL_FATAL(
      taxi_proactor_write(b, &wop, sv[0], &wb, 1, pt_on_done, &wd), 0);
  CU_ASSERT_EQUAL(taxi_proactor_move(b, sv[0], a), TAXI_EBUSY);
  CU_ASSERT_FATAL(pt_run_done(b, &wd, 1));
  CU_ASSERT_EQUAL(taxi_proactor_move(b, sv[0], a), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_close(b, sv[0]), 0);
  CU_ASSERT_FATAL(pt_run_done(b, &rd, 1));
  CU_ASSERT_EQUAL(rd.status, TAXI_ECANCELED);
  /* Closed: on neither any more. */
  CU_ASSERT_EQUAL(taxi_proactor_move(b, sv[0], a), TAXI_ENOENT);
  CU_ASSERT_EQUAL(gr_handles(a), 0);
  CU_ASSERT_EQUAL(gr_handles(b), 0);
  pt_close(&sv[1]);
  pt_destroy(a);
  pt_destroy(b);
}

/* stats.handles: the handles attached now. */
static void test_stats_handles(void) {
  taxi_proactor_t *p = pt_proactor();
  CU_ASSERT_EQUAL(gr_handles(p), 0);
  int s1[2], s2[2];
  pt_pair(p, s1);
  CU_ASSERT_EQUAL(gr_handles(p), 1);
  pt_pair(p, s2);
  CU_ASSERT_EQUAL(gr_handles(p), 2);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, s1[0]), TAXI_EEXIST);
  CU_ASSERT_EQUAL(gr_handles(p), 2);
  CU_ASSERT_EQUAL(taxi_proactor_close(p, s1[0]), 0);
  CU_ASSERT_EQUAL(gr_handles(p), 1);
  CU_ASSERT_EQUAL(taxi_proactor_detach(p, s2[0]), 0);
  CU_ASSERT_EQUAL(gr_handles(p), 0);
  CU_ASSERT_EQUAL(taxi_proactor_attach(p, s2[0]), 0);
  CU_ASSERT_EQUAL(gr_handles(p), 1);
  pt_close(&s1[1]);
  pt_close(&s2[1]);
  pt_destroy(p); /* closes s2[0] */
}

static CU_TestInfo group_tests[] = {
    {"echo over a group of 1", test_echo_1},
    {"echo over a group of 2", test_echo_2},
    {"echo over a group of 4", test_echo_4},
    {"echo over a group of 8", test_echo_8},
    {"an operation started from another proactor's thread", test_cross_thread},
    {"a moved handle completes in its new proactor's thread", test_move_works},
    {"move: refusals, in flight, both directions", test_move_refused},
    {"stats.handles counts the attached handles", test_stats_handles},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_group = {"group", group_tests, 120, NULL};
