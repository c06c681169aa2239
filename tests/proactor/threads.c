/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/threads.c - who dispatches completions.
 *
 * Suite "dispatch": handle_events by one thread at a time (another gets
 * TAXI_EBUSY), run in one thread stopped from another, stop before run,
 * restart, and what a completion handler may not do (dispatch or destroy
 * its own proactor).
 *
 * Suite "pool": the Leader/Followers pool over the completion queue
 * (taxi_lf_create_proactor): 8 threads echoing framed messages on many
 * connections with every message counted exactly once and in order per
 * connection; TAXI_LEADERS_MANY refused where the backend has no
 * multi-wait; completions reaped by one wait taken by the next threads
 * without another system call; the pool excluding handle_events; posts,
 * cancellation and close from other threads.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- dispatch ------------------------------------------------------------ */

typedef struct th_runner {
  taxi_proactor_t *p;
  atomic_int started;
  int rc;
  pthread_t thread;
} th_runner_t;

static void th_run(void *arg) {
  th_runner_t *r = arg;
  r->thread = pthread_self();
  atomic_store(&r->started, 1);
  r->rc = taxi_proactor_run(r->p);
}

/* Wait until the posted record has run in some thread. */
static int th_wait_done(pt_done_t *d, int n) {
  return util_wait_flag(&d->calls, n, pt_wait_ms());
}

/* taxi_proactor_run in one thread runs the completions of operations
 * started from another; taxi_proactor_stop from that other thread makes
 * it return 0.  While it runs, handle_events and run elsewhere get
 * TAXI_EBUSY, and destroy too. */
static void test_run_stop_from_other_thread(void) {
  taxi_proactor_t *p = pt_proactor();
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  CU_ASSERT_FATAL(util_wait_flag(&r.started, 1, pt_wait_ms()));
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, pt_on_done, &d), 0);
  CU_ASSERT(th_wait_done(&d, 1));
  CU_ASSERT(pthread_equal(d.thread, r.thread));
  /* The run thread is dispatching (or about to): one dispatcher only. */
  pt_sleep_ms(10);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_run(p), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), TAXI_EBUSY);
  /* A timer started from here runs there. */
  pt_done_init(&d);
  CU_ASSERT_EQUAL(
      taxi_proactor_timer(p, &op, TAXI_NSEC_PER_MSEC, pt_on_done, &d), 0);
  CU_ASSERT(th_wait_done(&d, 1));
  CU_ASSERT(pthread_equal(d.thread, r.thread));
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  pt_thread_join(&t, 1, "taxi_proactor_run after taxi_proactor_stop");
  CU_ASSERT_EQUAL(r.rc, 0);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  pt_destroy(p);
}

/* Stopped before run: run returns 0 at once, and handle_events returns 0
 * without running a ready completion; after restart it runs. */
static void test_stop_before_run(void) {
  taxi_proactor_t *p = pt_proactor();
  CU_ASSERT_EQUAL(taxi_proactor_stop(p), 0);
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  pt_thread_join(&t, 1, "taxi_proactor_run on a stopped proactor");
  CU_ASSERT_EQUAL(r.rc, 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, pt_on_done, &d), 0);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 10), 0);
  CU_ASSERT_EQUAL(atomic_load(&d.calls), 0);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  CU_ASSERT_EQUAL(d.status, 0);
  pt_destroy(p);
}

/* A completion handler stops run; a handler may not dispatch or destroy
 * its own proactor (an error, not a recursion or a crash). */
typedef struct th_inner {
  taxi_proactor_t *p;
  int he_rc, destroy_rc, stop_rc;
  atomic_int calls;
} th_inner_t;

static void th_on_inner(taxi_op_t *op, int status, size_t bytes, void *act) {
  th_inner_t *x = act;
  (void)op;
  (void)status;
  (void)bytes;
  x->he_rc = taxi_proactor_handle_events(x->p, 0);
  x->destroy_rc = taxi_proactor_destroy(x->p);
  x->stop_rc = taxi_proactor_stop(x->p);
  atomic_fetch_add(&x->calls, 1);
}

static void test_handler_limits_and_stop(void) {
  taxi_proactor_t *p = pt_proactor();
  static th_inner_t x;
  memset(&x, 0, sizeof x);
  x.p = p;
  taxi_op_t op;
  taxi_op_init(&op);
  CU_ASSERT_EQUAL_FATAL(taxi_proactor_post(p, &op, th_on_inner, &x), 0);
  static th_runner_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.rc = -100;
  pt_thread_t t;
  pt_thread_start(&t, th_run, &r);
  pt_thread_join(&t, 1, "taxi_proactor_run stopped by its handler");
  CU_ASSERT_EQUAL(r.rc, 0);
  CU_ASSERT_EQUAL(atomic_load(&x.calls), 1);
  CU_ASSERT(x.he_rc < 0);
  CU_ASSERT_EQUAL(x.destroy_rc, TAXI_EBUSY);
  CU_ASSERT_EQUAL(x.stop_rc, 0);
  CU_ASSERT_EQUAL(taxi_proactor_restart(p), 0);
  pt_destroy(p);
}

/* handle_events(p, 0) with nothing to do returns 0; with a ready
 * completion, the number of handlers run. */
static void test_handle_events_counts(void) {
  taxi_proactor_t *p = pt_proactor();
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);
  enum { N = 5 };
  taxi_op_t ops[N];
  pt_done_t d[N];
  for (int i = 0; i < N; i++) {
    taxi_op_init(&ops[i]);
    pt_done_init(&d[i]);
    CU_ASSERT_EQUAL(taxi_proactor_post(p, &ops[i], pt_on_done, &d[i]), 0);
  }
  int ran = 0, rounds = 0;
  while (ran < N && rounds++ < 100) {
    int rc = taxi_proactor_handle_events(p, 100);
    CU_ASSERT(rc >= 0);
    if (rc < 0) break;
    ran += rc;
  }
  CU_ASSERT_EQUAL(ran, N);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(atomic_load(&d[i].calls), 1);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), 0);
  taxi_proactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &s), 0);
  CU_ASSERT(s.started >= N);
  CU_ASSERT(s.completed >= N);
  pt_destroy(p);
}

static CU_TestInfo dispatch_tests[] = {
    {"run in one thread, stop from another; one dispatcher at a time",
     test_run_stop_from_other_thread},
    {"stop before run; restart", test_stop_before_run},
    {"a handler stops run; may not dispatch or destroy",
     test_handler_limits_and_stop},
    {"handle_events returns the handlers run", test_handle_events_counts},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_dispatch = {"dispatch", dispatch_tests, 60,
                                             NULL};

/* ---- the pool: exactly-once echo ----------------------------------------- */

#define EC_THREADS 8
#define EC_CLIENTS 2
#define EC_RING 4 /* frames a connection may have read but not echoed */
#define EC_HDR 8
#define EC_MAX_PAYLOAD 512
#define EC_FRAME_MAX (EC_HDR + EC_MAX_PAYLOAD)
#define EC_WINDOW 4096 /* client bytes in flight per connection */

typedef struct ec_run ec_run_t;

typedef struct ec_conn {
  ec_run_t *run;
  uint32_t index;
  int sfd, cfd;
  /* server: the read chain (header, payload) and up to EC_RING writes */
  pthread_mutex_t mu;
  taxi_op_t rop;
  taxi_op_t wop[EC_RING];
  unsigned char slot[EC_RING][EC_FRAME_MAX];
  int in_header;          /* the read in flight is a header */
  uint32_t rx_seq;        /* frames read completely (under mu) */
  uint32_t tx_done;       /* frame writes completed (under mu) */
  int slot_busy[EC_RING]; /* its write's handler has not run yet */
  int read_stalled;       /* ring full: the write handler restarts reading */
  int closed;             /* the read chain ended */
  atomic_int busy_read;   /* >1 would mean two read handlers at once */
  /* client, touched by its client thread only */
  uint32_t quota, tx_seq, cl_rx_seq;
  unsigned char txf[EC_FRAME_MAX], rxf[EC_FRAME_MAX];
  size_t txlen, txoff, rxlen, rxoff;
  uint64_t tx_bytes, rx_bytes;
  int bad;
} ec_conn_t;

struct ec_run {
  taxi_proactor_t *p;
  taxi_lf_pool_t *pool;
  int conns;
  long msgs;
  ec_conn_t *c;
  atomic_long echoed;   /* frames whose write completed, all connections */
  atomic_long verified; /* frames the clients checked */
  atomic_int server_errors;
  atomic_int order_errors;
  atomic_int overlaps;
  atomic_int closed;
  atomic_int client_failed;
  atomic_int stop;
};

static size_t ec_payload_len(uint32_t conn, uint32_t seq) {
  uint64_t s = ((uint64_t)conn << 32) ^ seq ^ 0x5eed;
  return 1 + (size_t)(pt_rand(&s) % EC_MAX_PAYLOAD);
}

/* The frame `seq` of connection `conn`; returns its length. */
static size_t ec_frame(uint32_t conn, uint32_t seq, unsigned char *out) {
  uint32_t len = (uint32_t)ec_payload_len(conn, seq);
  memcpy(out, &len, 4);
  memcpy(out + 4, &seq, 4);
  pt_fill(out + EC_HDR, len, ((uint64_t)conn << 32) | seq);
  return EC_HDR + len;
}

static void ec_on_read(taxi_op_t *op, int status, size_t bytes, void *act);
static void ec_on_write(taxi_op_t *op, int status, size_t bytes, void *act);

/* Under c->mu: read the next header into the free slot, or note that the
 * ring is full. */
static void ec_read_next_locked(ec_conn_t *c) {
  if (c->slot_busy[c->rx_seq % EC_RING]) {
    c->read_stalled = 1;
    return;
  }
  c->in_header = 1;
  int rc = taxi_proactor_read(c->run->p, &c->rop, c->sfd,
                              c->slot[c->rx_seq % EC_RING], EC_HDR,
                              TAXI_READ_EXACT, ec_on_read, c);
  if (rc != 0) {
    atomic_fetch_add(&c->run->server_errors, 1);
    c->closed = 1;
    atomic_fetch_add(&c->run->closed, 1);
  }
}

static void ec_end_read_chain(ec_conn_t *c, int status) {
  if (status != TAXI_EEOF && status != TAXI_ECANCELED) {
    printf("\n    server %u: read status %d (%s)\n", c->index, status,
           taxi_error_name(status));
    atomic_fetch_add(&c->run->server_errors, 1);
  }
  pthread_mutex_lock(&c->mu);
  c->closed = 1;
  pthread_mutex_unlock(&c->mu);
  if (status == TAXI_EEOF) taxi_proactor_close(c->run->p, c->sfd);
  atomic_fetch_add(&c->run->closed, 1);
}

/* The read chain of a connection is one record, so its handlers never
 * overlap: each starts the next read as its last step (the next handler
 * may run in another thread as soon as that read is started, so the busy
 * count is dropped just before). */
static void ec_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  ec_conn_t *c = act;
  (void)op;
  if (atomic_fetch_add(&c->busy_read, 1) != 0)
    atomic_fetch_add(&c->run->overlaps, 1);
  if (status != 0) {
    atomic_fetch_sub(&c->busy_read, 1);
    ec_end_read_chain(c, status);
    return;
  }
  pthread_mutex_lock(&c->mu);
  unsigned slot = c->rx_seq % EC_RING;
  unsigned char *f = c->slot[slot];
  uint32_t len, seq;
  memcpy(&len, f, 4);
  memcpy(&seq, f + 4, 4);
  if (c->in_header) {
    if (bytes != EC_HDR || seq != c->rx_seq || len == 0 ||
        len > EC_MAX_PAYLOAD) {
      printf("\n    server %u: frame %u: header says seq %u len %u\n", c->index,
             c->rx_seq, seq, len);
      atomic_fetch_add(&c->run->order_errors, 1);
      atomic_fetch_sub(&c->busy_read, 1);
      pthread_mutex_unlock(&c->mu);
      return; /* the connection stalls; the test reports it */
    }
    c->in_header = 0;
    atomic_fetch_sub(&c->busy_read, 1);
    if (taxi_proactor_read(c->run->p, &c->rop, c->sfd, f + EC_HDR, len,
                           TAXI_READ_EXACT, ec_on_read, c) != 0)
      atomic_fetch_add(&c->run->server_errors, 1);
  } else {
    if (bytes != len) atomic_fetch_add(&c->run->order_errors, 1);
    taxi_buf_t b = {f, EC_HDR + (size_t)len};
    c->slot_busy[slot] = 1;
    if (taxi_proactor_write(c->run->p, &c->wop[slot], c->sfd, &b, 1,
                            ec_on_write, c) != 0)
      atomic_fetch_add(&c->run->server_errors, 1);
    c->rx_seq++;
    atomic_fetch_sub(&c->busy_read, 1);
    ec_read_next_locked(c);
  }
  pthread_mutex_unlock(&c->mu);
}

/*
 * A write is done.  With several pool threads the handlers of consecutive
 * writes may run in either order (both completions can be taken before
 * either handler locks the connection), so order is checked where it is
 * observable: in the bytes the client receives.  A slot is reused only
 * when the handler of its own write has run, since until then its record
 * is in flight.
 */
static void ec_on_write(taxi_op_t *op, int status, size_t bytes, void *act) {
  ec_conn_t *c = act;
  size_t slot = (size_t)(op - c->wop);
  pthread_mutex_lock(&c->mu);
  if (slot >= EC_RING || !c->slot_busy[slot]) {
    atomic_fetch_add(&c->run->order_errors, 1);
  } else {
    c->slot_busy[slot] = 0;
  }
  if (status != 0 || bytes <= EC_HDR) {
    printf("\n    server %u: write status %d (%s), %zu bytes\n", c->index,
           status, taxi_error_name(status), bytes);
    atomic_fetch_add(&c->run->server_errors, 1);
  }
  c->tx_done++;
  atomic_fetch_add(&c->run->echoed, 1);
  if (c->read_stalled && !c->closed) {
    c->read_stalled = 0;
    ec_read_next_locked(c);
  }
  pthread_mutex_unlock(&c->mu);
}

/* ---- the clients (plain sockets, a poll loop each) ---- */

typedef struct ec_client_thread {
  ec_run_t *run;
  int first, step;
} ec_client_thread_t;

/* Send what the window allows; 0, or -1 on a write error. */
static int ec_client_send(ec_conn_t *c) {
  for (;;) {
    if (c->txoff == c->txlen) {
      if (c->tx_seq >= c->quota) return 0;
      size_t next = EC_HDR + ec_payload_len(c->index, c->tx_seq);
      if (c->tx_bytes - c->rx_bytes + next > EC_WINDOW) return 0;
      c->txlen = ec_frame(c->index, c->tx_seq, c->txf);
      c->txoff = 0;
      c->tx_seq++;
    }
    ssize_t n =
        send(c->cfd, c->txf + c->txoff, c->txlen - c->txoff, MSG_NOSIGNAL);
    if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    c->txoff += (size_t)n;
    c->tx_bytes += (uint64_t)n;
  }
}

/* Read and check what came back; -1 on a wrong byte, EOF or error. */
static int ec_client_recv(ec_run_t *run, ec_conn_t *c) {
  for (;;) {
    if (c->rxoff == c->rxlen) {
      if (c->cl_rx_seq >= c->quota) return 0;
      c->rxlen = ec_frame(c->index, c->cl_rx_seq, c->rxf);
      c->rxoff = 0;
    }
    unsigned char buf[EC_FRAME_MAX];
    ssize_t n = read(c->cfd, buf, c->rxlen - c->rxoff);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n <= 0) {
      printf("\n    client %u: %s after %u frames\n", c->index,
             n == 0 ? "EOF" : strerror(errno), c->cl_rx_seq);
      return -1;
    }
    long d = pt_diff(buf, c->rxf + c->rxoff, (size_t)n);
    if (d >= 0) {
      printf("\n    client %u: frame %u wrong at byte %zu\n", c->index,
             c->cl_rx_seq, c->rxoff + (size_t)d);
      return -1;
    }
    c->rxoff += (size_t)n;
    c->rx_bytes += (uint64_t)n;
    if (c->rxoff == c->rxlen) {
      c->cl_rx_seq++;
      atomic_fetch_add(&run->verified, 1);
    }
  }
}

static void ec_client_main(void *arg) {
  ec_client_thread_t *ct = arg;
  ec_run_t *run = ct->run;
  int n = 0;
  for (int i = ct->first; i < run->conns; i += ct->step) n++;
  struct pollfd *pf = calloc((size_t)n, sizeof *pf);
  ec_conn_t **cs = calloc((size_t)n, sizeof *cs);
  if (!pf || !cs) {
    atomic_fetch_add(&run->client_failed, 1);
    free(pf);
    free(cs);
    return;
  }
  int k = 0;
  for (int i = ct->first; i < run->conns; i += ct->step) cs[k++] = &run->c[i];
  for (;;) {
    if (atomic_load(&run->stop)) break;
    int live = 0;
    for (int i = 0; i < n; i++) {
      ec_conn_t *c = cs[i];
      pf[i].fd = -1;
      pf[i].revents = 0;
      if (c->bad || c->cl_rx_seq >= c->quota) continue;
      if (ec_client_send(c) != 0) {
        c->bad = 1;
        atomic_fetch_add(&run->client_failed, 1);
        continue;
      }
      pf[i].fd = c->cfd;
      pf[i].events = POLLIN | (c->txoff < c->txlen ? POLLOUT : 0);
      live++;
    }
    if (live == 0) break;
    int rc = poll(pf, (nfds_t)n, 100);
    if (rc < 0 && errno != EINTR) {
      atomic_fetch_add(&run->client_failed, 1);
      break;
    }
    for (int i = 0; i < n && rc > 0; i++) {
      if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLERR | POLLHUP)))
        continue;
      if (ec_client_recv(run, cs[i]) != 0) {
        cs[i]->bad = 1;
        atomic_fetch_add(&run->client_failed, 1);
      }
    }
  }
  free(pf);
  free(cs);
}

static int ec_destroy_pool(void *arg) {
  return taxi_lf_destroy((taxi_lf_pool_t *)arg);
}

static void test_pool_echo_exactly_once(void) {
  static ec_run_t run;
  memset(&run, 0, sizeof run);
  run.conns = pt_small() ? 20 : 100;
  run.msgs = pt_small() ? 10000 : 100000;
  run.p = pt_proactor();
  run.c = calloc((size_t)run.conns, sizeof *run.c);
  CU_ASSERT_FATAL(run.c != NULL);
  for (int i = 0; i < run.conns; i++) {
    ec_conn_t *c = &run.c[i];
    int sv[2];
    pt_pair(run.p, sv);
    c->run = &run;
    c->index = (uint32_t)i;
    c->sfd = sv[0];
    c->cfd = sv[1];
    c->quota = (uint32_t)(run.msgs / run.conns);
    pthread_mutex_init(&c->mu, NULL);
    taxi_op_init(&c->rop);
    for (int j = 0; j < EC_RING; j++) taxi_op_init(&c->wop[j]);
    pthread_mutex_lock(&c->mu);
    ec_read_next_locked(c);
    pthread_mutex_unlock(&c->mu);
  }
  /* Where the completion queue takes several waiters (IOCP), the pool runs
   * as the paper's multiple leaders on a concurrent handle set. */
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  if (pt_backend_is("iocp")) o.leaders = TAXI_LEADERS_MANY;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&run.pool, run.p, &o), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(run.pool, EC_THREADS), 0);

  ec_client_thread_t ct[EC_CLIENTS];
  pt_thread_t t[EC_CLIENTS];
  for (int i = 0; i < EC_CLIENTS; i++) {
    ct[i].run = &run;
    ct[i].first = i;
    ct[i].step = EC_CLIENTS;
    pt_thread_start(&t[i], ec_client_main, &ct[i]);
  }
  /* Stop when done, or when nothing was verified for a while (lost). */
  long total = (long)(run.msgs / run.conns) * run.conns;
  long last = -1;
  taxi_time_t progress = taxi_now();
  while (atomic_load(&run.verified) < total &&
         atomic_load(&run.client_failed) == 0) {
    long v = atomic_load(&run.verified);
    if (v != last) {
      last = v;
      progress = taxi_now();
    } else if (util_elapsed_ms(progress) > 2 * pt_wait_ms()) {
      printf("\n    stalled: %ld of %ld messages verified\n", v, total);
      break;
    }
    pt_sleep_ms(5);
  }
  atomic_store(&run.stop, 1);
  for (int i = 0; i < EC_CLIENTS; i++) pt_thread_join(&t[i], 1, "a client");

  CU_ASSERT_EQUAL(atomic_load(&run.verified), total);
  CU_ASSERT_EQUAL(atomic_load(&run.client_failed), 0);
  /* Every echo was written once: wait until the last write completions
   * have been dispatched (the bytes can arrive before the handler runs). */
  taxi_time_t start = taxi_now();
  while (atomic_load(&run.echoed) < total &&
         util_elapsed_ms(start) < pt_wait_ms())
    pt_sleep_ms(1);
  CU_ASSERT_EQUAL(atomic_load(&run.echoed), total);

  /* The clients hang up; each server read chain sees EOF in the pool and
   * closes its end. */
  for (int i = 0; i < run.conns; i++) pt_close(&run.c[i].cfd);
  CU_ASSERT(util_wait_flag(&run.closed, run.conns, pt_wait_ms()));

  taxi_lf_stats_t ls;
  memset(&ls, 0, sizeof ls);
  CU_ASSERT_EQUAL(taxi_lf_stats(run.pool, &ls), 0);
  printf(
      "\n    %d connections, %ld messages: pool events %llu, waits %llu, "
      "pending taken %llu, promotions %llu\n",
      run.conns, total, (unsigned long long)ls.events,
      (unsigned long long)ls.waits, (unsigned long long)ls.pending_taken,
      (unsigned long long)ls.promotions);
  CU_ASSERT_EQUAL(pt_bounded(ec_destroy_pool, run.pool, "taxi_lf_destroy"), 0);

  CU_ASSERT_EQUAL(atomic_load(&run.server_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.order_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&run.closed), run.conns);
  int wrong = 0;
  for (int i = 0; i < run.conns; i++) {
    ec_conn_t *c = &run.c[i];
    if (c->rx_seq != c->quota || c->tx_done != c->quota || !c->closed)
      if (wrong++ < 5)
        printf("\n    connection %d: read %u, echoed %u of %u, closed %d\n", i,
               c->rx_seq, c->tx_done, c->quota, c->closed);
  }
  CU_ASSERT_EQUAL(wrong, 0);
  pt_destroy(run.p);
  for (int i = 0; i < run.conns; i++) pthread_mutex_destroy(&run.c[i].mu);
  free(run.c);
}

/* ---- the pool: the rest ---------------------------------------------------
 */

/* TAXI_LEADERS_MANY needs a completion queue several threads may wait on
 * at once (IOCP); every other backend refuses it with TAXI_ENOTSUP. */
static void test_pool_leaders_many(void) {
  taxi_proactor_t *p = pt_proactor();
  taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
  o.leaders = TAXI_LEADERS_MANY;
  taxi_lf_pool_t *pool = NULL;
  int rc = taxi_lf_create_proactor(&pool, p, &o);
  if (pt_backend_is("iocp")) {
    CU_ASSERT_EQUAL(rc, 0);
  } else {
    CU_ASSERT_EQUAL(rc, TAXI_ENOTSUP);
    CU_ASSERT_PTR_NULL(pool);
  }
  if (rc == 0) CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  /* One leader works, and the refusal left nothing behind. */
  pool = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  pt_destroy(p);
}

/* While a pool exists the proactor's own dispatch calls are refused, and
 * so is destroying it; afterwards they work again. */
static void test_pool_excludes_handle_events(void) {
  taxi_proactor_t *p = pt_proactor();
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
  taxi_lf_pool_t *second = NULL;
  CU_ASSERT_EQUAL(taxi_lf_create_proactor(&second, p, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_handle_events(p, 0), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_run(p), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_proactor_destroy(p), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_lf_destroy(pool), 0);
  taxi_op_t op;
  taxi_op_init(&op);
  pt_done_t d;
  pt_done_init(&d);
  CU_ASSERT_EQUAL(taxi_proactor_post(p, &op, pt_on_done, &d), 0);
  CU_ASSERT(pt_run_done(p, &d, 1));
  pt_destroy(p);
}

/* Posts from 4 threads while 8 pool threads dispatch: each runs exactly
 * once, in a pool thread. */
enum { PP_THREADS = 4, PP_EACH = 2000 };
typedef struct pp_run {
  taxi_proactor_t *p;
  taxi_lf_pool_t *pool;
  taxi_op_t ops[PP_THREADS][PP_EACH];
  atomic_int calls[PP_THREADS][PP_EACH];
  atomic_int total;
  atomic_int not_in_pool;
  atomic_int bad_status;
  atomic_int post_errors;
  int next;
} pp_run_t;

typedef struct pp_poster {
  pp_run_t *run;
  int index;
} pp_poster_t;

static void pp_on_post(taxi_op_t *op, int status, size_t bytes, void *act) {
  pp_run_t *r = act;
  size_t i = (size_t)(op - &r->ops[0][0]);
  if (status != 0 || bytes != 0) atomic_fetch_add(&r->bad_status, 1);
  if (taxi_lf_current_thread(r->pool) < 0) atomic_fetch_add(&r->not_in_pool, 1);
  if (i < (size_t)PP_THREADS * PP_EACH)
    atomic_fetch_add(&r->calls[i / PP_EACH][i % PP_EACH], 1);
  atomic_fetch_add(&r->total, 1);
}

static void pp_post_all(void *arg) {
  pp_poster_t *x = arg;
  pp_run_t *r = x->run;
  for (int i = 0; i < PP_EACH; i++)
    if (taxi_proactor_post(r->p, &r->ops[x->index][i], pp_on_post, r) != 0)
      atomic_fetch_add(&r->post_errors, 1);
}

static void test_pool_posts_from_threads(void) {
  static pp_run_t r;
  memset(&r, 0, sizeof r);
  r.p = pt_proactor();
  for (int t = 0; t < PP_THREADS; t++)
    for (int i = 0; i < PP_EACH; i++) taxi_op_init(&r.ops[t][i]);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&r.pool, r.p, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(r.pool, EC_THREADS), 0);
  pp_poster_t x[PP_THREADS];
  pt_thread_t t[PP_THREADS];
  for (int i = 0; i < PP_THREADS; i++) {
    x[i].run = &r;
    x[i].index = i;
    pt_thread_start(&t[i], pp_post_all, &x[i]);
  }
  for (int i = 0; i < PP_THREADS; i++) pt_thread_join(&t[i], 1, "a poster");
  CU_ASSERT(util_wait_flag(&r.total, PP_THREADS * PP_EACH, pt_wait_ms()));
  CU_ASSERT_EQUAL(pt_bounded(ec_destroy_pool, r.pool, "taxi_lf_destroy"), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.total), PP_THREADS * PP_EACH);
  CU_ASSERT_EQUAL(atomic_load(&r.post_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.not_in_pool), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.bad_status), 0);
  int wrong = 0;
  for (int t2 = 0; t2 < PP_THREADS; t2++)
    for (int i = 0; i < PP_EACH; i++)
      if (atomic_load(&r.calls[t2][i]) != 1) wrong++;
  CU_ASSERT_EQUAL(wrong, 0);
  pt_destroy(r.p);
}

/* Completions reaped by one wait are taken by the next threads without
 * another system call: with 64 reads made ready before the pool starts,
 * the pool runs them with fewer waits than completions. */
enum { PB_PAIRS = 64 };
typedef struct pb_run {
  taxi_op_t ops[PB_PAIRS];
  pt_done_t d[PB_PAIRS];
  char buf[PB_PAIRS][4];
  int sv[PB_PAIRS][2];
  atomic_int total;
} pb_run_t;

static void pb_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  pb_run_t *r = act;
  size_t i = (size_t)(op - r->ops);
  if (i < PB_PAIRS) pt_on_done(op, status, bytes, &r->d[i]);
  atomic_fetch_add(&r->total, 1);
}

static void test_pool_batches(void) {
  static pb_run_t r;
  memset(&r, 0, sizeof r);
  taxi_proactor_t *p = pt_proactor();
  for (int i = 0; i < PB_PAIRS; i++) {
    pt_pair(p, r.sv[i]);
    taxi_op_init(&r.ops[i]);
    pt_done_init(&r.d[i]);
    CU_ASSERT_EQUAL_FATAL(taxi_proactor_read(p, &r.ops[i], r.sv[i][0], r.buf[i],
                                             4, 0, pb_on_read, &r),
                          0);
  }
  for (int i = 0; i < PB_PAIRS; i++)
    CU_ASSERT_EQUAL(pt_peer_write(r.sv[i][1], "x", 1), 0);
  pt_sleep_ms(20); /* let asynchronous backends finish the reads */
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, p, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(pool, 2), 0);
  CU_ASSERT(util_wait_flag(&r.total, PB_PAIRS, pt_wait_ms()));
  /* The pool counts an event after its handler returns: the last handler
   * may have counted itself in r.total but not yet in the pool's stats. */
  taxi_lf_stats_t ls;
  memset(&ls, 0, sizeof ls);
  for (int waited = 0; waited <= pt_wait_ms(); waited++) {
    CU_ASSERT_EQUAL_FATAL(taxi_lf_stats(pool, &ls), 0);
    if (ls.events >= PB_PAIRS) break;
    pt_sleep_ms(1);
  }
  taxi_proactor_stats_t ps;
  CU_ASSERT_EQUAL(taxi_proactor_stats(p, &ps), 0);
  printf(
      "\n    pool events %llu, waits %llu, pending taken %llu; proactor "
      "completed %llu, waits %llu, syscalls %llu\n",
      (unsigned long long)ls.events, (unsigned long long)ls.waits,
      (unsigned long long)ls.pending_taken, (unsigned long long)ps.completed,
      (unsigned long long)ps.waits, (unsigned long long)ps.syscalls);
  CU_ASSERT(ls.events >= PB_PAIRS);
  CU_ASSERT(ls.waits < ls.events);
  CU_ASSERT(ls.pending_taken > 0);
  CU_ASSERT(ps.waits < ps.completed);
  CU_ASSERT_EQUAL(pt_bounded(ec_destroy_pool, pool, "taxi_lf_destroy"), 0);
  for (int i = 0; i < PB_PAIRS; i++) {
    CU_ASSERT_EQUAL(atomic_load(&r.d[i].calls), 1);
    CU_ASSERT_EQUAL(r.d[i].status, 0);
    CU_ASSERT_EQUAL(r.d[i].bytes, 1);
    pt_close(&r.sv[i][1]);
  }
  pt_destroy(p);
}

/* While the pool dispatches, other threads close half of the sockets that
 * have reads pending and cancel the reads on the other half, as the peers
 * write: every read completes exactly once, with its data or
 * TAXI_ECANCELED. */
enum { PC_PAIRS = 64, PC_READS = 3 };
typedef struct pc_run {
  taxi_proactor_t *p;
  taxi_op_t ops[PC_PAIRS][PC_READS];
  atomic_int calls[PC_PAIRS][PC_READS];
  atomic_int status[PC_PAIRS][PC_READS];
  char buf[PC_PAIRS][PC_READS][2];
  int sv[PC_PAIRS][2];
  atomic_int total;
  atomic_int rc_errors;
} pc_run_t;

static void pc_on_read(taxi_op_t *op, int status, size_t bytes, void *act) {
  pc_run_t *r = act;
  size_t i = (size_t)(op - &r->ops[0][0]);
  (void)bytes;
  if (i < (size_t)PC_PAIRS * PC_READS) {
    atomic_store(&r->status[i / PC_READS][i % PC_READS], status);
    atomic_fetch_add(&r->calls[i / PC_READS][i % PC_READS], 1);
  }
  atomic_fetch_add(&r->total, 1);
}

static void pc_closer(void *arg) {
  pc_run_t *r = arg;
  for (int i = 0; i < PC_PAIRS; i += 2)
    if (taxi_proactor_close(r->p, r->sv[i][0]) != 0)
      atomic_fetch_add(&r->rc_errors, 1);
}

static void pc_canceller(void *arg) {
  pc_run_t *r = arg;
  for (int i = 1; i < PC_PAIRS; i += 2)
    for (int j = 0; j < PC_READS; j++) {
      int rc = taxi_proactor_cancel(r->p, &r->ops[i][j]);
      if (rc != 0 && rc != TAXI_ENOENT) atomic_fetch_add(&r->rc_errors, 1);
    }
}

static void pc_writer(void *arg) {
  pc_run_t *r = arg;
  for (int i = 0; i < PC_PAIRS; i++) send(r->sv[i][1], "ab", 2, MSG_NOSIGNAL);
}

static void test_pool_close_cancel_from_threads(void) {
  static pc_run_t r;
  memset(&r, 0, sizeof r);
  r.p = pt_proactor();
  for (int i = 0; i < PC_PAIRS; i++) {
    pt_pair(r.p, r.sv[i]);
    for (int j = 0; j < PC_READS; j++) {
      taxi_op_init(&r.ops[i][j]);
      CU_ASSERT_EQUAL_FATAL(
          taxi_proactor_read(r.p, &r.ops[i][j], r.sv[i][0], r.buf[i][j], 2, 0,
                             pc_on_read, &r),
          0);
    }
  }
  taxi_lf_pool_t *pool = NULL;
  CU_ASSERT_EQUAL_FATAL(taxi_lf_create_proactor(&pool, r.p, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(pool, EC_THREADS), 0);
  pt_thread_t tc, tx, tw;
  pt_thread_start(&tw, pc_writer, &r);
  pt_thread_start(&tc, pc_closer, &r);
  pt_thread_start(&tx, pc_canceller, &r);
  pt_thread_join(&tw, 1, "the writer");
  pt_thread_join(&tc, 1, "the closer");
  pt_thread_join(&tx, 1, "the canceller");
  CU_ASSERT(util_wait_flag(&r.total, PC_PAIRS * PC_READS, pt_wait_ms()));
  CU_ASSERT_EQUAL(pt_bounded(ec_destroy_pool, pool, "taxi_lf_destroy"), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.rc_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.total), PC_PAIRS * PC_READS);
  int wrong = 0;
  for (int i = 0; i < PC_PAIRS; i++)
    for (int j = 0; j < PC_READS; j++) {
      int st = atomic_load(&r.status[i][j]);
      if (atomic_load(&r.calls[i][j]) != 1 || (st != 0 && st != TAXI_ECANCELED))
        wrong++;
    }
  CU_ASSERT_EQUAL(wrong, 0);
  for (int i = 0; i < PC_PAIRS; i++) pt_close(&r.sv[i][1]);
  pt_destroy(r.p);
}

static CU_TestInfo pool_tests[] = {
    {"8 threads echo framed messages: each once, in order per connection",
     test_pool_echo_exactly_once},
    {"TAXI_LEADERS_MANY refused without multi-wait", test_pool_leaders_many},
    {"a pool excludes handle_events, run and destroy",
     test_pool_excludes_handle_events},
    {"posts from 4 threads run once each in the pool",
     test_pool_posts_from_threads},
    {"one wait's completions taken without another wait", test_pool_batches},
    {"close and cancel from other threads while the pool runs",
     test_pool_close_cancel_from_threads},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pt_suite_pool = {"pool", pool_tests, 240, NULL};
