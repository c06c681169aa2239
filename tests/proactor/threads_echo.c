/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/threads_echo.c - the Leader/Followers pool over the
 * completion queue (taxi_lf_create_proactor): 8 threads echoing framed
 * messages on many connections, with every message counted exactly once
 * and in order per connection; the clients are plain sockets, a poll loop
 * each (a test of the "pool" suite, in threads_pool.c).
 */
#define _GNU_SOURCE 1

#include "threads_helpers.h"

/* ---- the pool: exactly-once echo ----------------------------------------- */
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

int ec_destroy_pool(void *arg) {
  return taxi_lf_destroy((taxi_lf_pool_t *)arg);
}

void test_pool_echo_exactly_once(void) {
  if (pt_skip_one_thread()) return;
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
