/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/stress.c - exactly-once delivery through the pools.
 *
 * Many connections (socketpairs), an echo handler running in the pool on
 * the server end of each, and 3 client threads with poll loops of their
 * own (not through the pool) on the other ends.  Each client writes framed
 * messages (4-byte length, 4-byte sequence number, 1..512 bytes of payload
 * from a generator seeded by (connection, sequence)) with at most
 * ST_WINDOW bytes in flight per connection, and checks every byte that
 * comes back against what it must be: every message echoed exactly once,
 * in order per connection, content intact, nothing lost.
 *
 * Meanwhile a chaos thread suspends and resumes random server handlers and
 * removes some (their close hook closes the server end): the client then
 * sees EOF and stops; the check for such a connection is that every byte
 * the server had echoed before removal arrived, in order, and nothing
 * else.
 *
 * Configurations, each its own suite: the LF pool (LIFO, one leader, 8
 * threads), the LF pool with many leaders where the backend can, and the
 * HSHA pool (8 workers).  Sizes: 1,000 connections and 1,000,000 messages
 * per configuration; with TAXI_TEST_SMALL set, 200 and 100,000.  On a
 * backend with a handle limit (select's FD_SETSIZE, read from
 * taxi_backend_info().max_handles) the server ends must be numbered below
 * it: the client ends are moved above it, and the connections are capped
 * at max_handles - 64 (the message count stays); the test prints so.
 *
 * A client gives a connection up at its first wrong byte, and the run is
 * stopped when no message has been verified for ST_STALL_MS (lost
 * messages) or it passes its deadline, so a bug fails the test quickly
 * rather than at the runner's time limit.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ST_FULL_CONNS 1000
#define ST_FULL_MSGS 1000000L
#define ST_SMALL_CONNS 200
#define ST_SMALL_MSGS 100000L
#define ST_THREADS 8   /* pool threads or workers */
#define ST_CLIENTS 3   /* client threads */
#define ST_BUF 4096    /* server buffer */
#define ST_WINDOW 4096 /* client bytes in flight per connection */
#define ST_HDR 8
#define ST_MAX_PAYLOAD 512
#define ST_FRAME_MAX (ST_HDR + ST_MAX_PAYLOAD)
#define ST_TIMEOUT_S 240u
#define ST_STALL_MS 20000 /* no message verified for this long: stop */

enum { ST_LF_ONE, ST_LF_MANY, ST_HSHA };

typedef struct st_run st_run_t;

typedef struct st_server {
  taxi_handler_t h;
  int fd;
  int index;
  st_run_t *run;
  unsigned interest;
  size_t len, off;
  uint64_t rx, tx; /* bytes read, bytes echoed: touched by hooks only */
  atomic_int busy;
  atomic_int overlaps;
  atomic_int closes;
  atomic_int early_close;
  atomic_int errors;
  atomic_int last_errno;
  unsigned char buf[ST_BUF];
} st_server_t;

typedef struct st_client {
  int fd;
  uint32_t index;
  uint32_t quota;  /* messages to send */
  uint32_t tx_seq; /* messages started */
  size_t txlen, txoff;
  uint64_t tx_bytes, rx_bytes;
  uint32_t rx_seq; /* messages verified */
  size_t rxlen, rxoff;
  int eof, done;
  int bad;             /* bytes not as expected */
  int errs;            /* unexpected errors */
  atomic_int removed;  /* the chaos thread removed its server */
  atomic_int finished; /* done or eof */
  unsigned char txf[ST_FRAME_MAX];
  unsigned char rxf[ST_FRAME_MAX];
} st_client_t;

struct st_run {
  taxi_reactor_t *r;
  int kind;
  int conns;
  long msgs;
  st_server_t *srv;
  st_client_t *cli;
  atomic_long verified; /* messages verified, all connections */
  atomic_int stop_chaos;
  atomic_int timed_out; /* the run passed its deadline or stalled */
  atomic_int stop_clients;
  taxi_time_t deadline;
  /* chaos */
  int removals_wanted;
  int removals, suspends, chaos_errors;
  /* first failure seen by a client, for the report */
  atomic_int first_bad_conn;
};

/* ---- frames -------------------------------------------------------------- */

static void st_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* Message seq of connection conn: its bytes into out; returns the length. */
static size_t st_frame(uint32_t conn, uint32_t seq, unsigned char *out) {
  uint64_t st = ((uint64_t)conn << 32) | seq;
  uint64_t x = pools_rand(&st);
  uint32_t len = 1 + (uint32_t)(x % ST_MAX_PAYLOAD);
  st_put32(out, len);
  st_put32(out + 4, seq);
  uint32_t i = 0;
  while (i < len) {
    x = pools_rand(&st);
    for (int b = 0; b < 8 && i < len; b++)
      out[ST_HDR + i++] = (unsigned char)(x >> (8 * b));
  }
  return ST_HDR + len;
}

/* ---- the server: an echo handler in the pool ----------------------------- */

#define ST_SRV(hp) TAXI_CONTAINER_OF(hp, st_server_t, h)

static int st_removed(st_server_t *s) {
  return atomic_load(&s->run->cli[s->index].removed);
}

static void st_server_error(st_server_t *s, int err) {
  if (st_removed(s)) return; /* its handle may be gone: expected */
  atomic_fetch_add(&s->errors, 1);
  atomic_store(&s->last_errno, err);
}

/* Write what is buffered: 1 all written, 0 would block, -1 error. */
static int st_flush(st_server_t *s, int fd) {
  while (s->off < s->len) {
    ssize_t n = send(fd, s->buf + s->off, s->len - s->off, MSG_NOSIGNAL);
    if (n > 0) {
      s->off += (size_t)n;
      s->tx += (uint64_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    st_server_error(s, n < 0 ? errno : 0);
    return -1;
  }
  s->off = s->len = 0;
  return 1;
}

static int st_serve(taxi_handler_t *h, taxi_handle_t fd) {
  st_server_t *s = ST_SRV(h);
  if (atomic_exchange(&s->busy, 1) != 0) atomic_fetch_add(&s->overlaps, 1);
  int rc = 0;
  for (int i = 0; i < 16 && rc == 0; i++) {
    int f = st_flush(s, fd);
    if (f < 0) rc = -1;
    if (f <= 0) break;
    ssize_t n = read(fd, s->buf, sizeof s->buf);
    if (n > 0) {
      s->len = (size_t)n;
      s->off = 0;
      s->rx += (uint64_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    st_server_error(s, n < 0 ? errno : 0); /* EOF: the client never closes */
    rc = -1;
  }
  if (rc == 0 && st_flush(s, fd) < 0) rc = -1;
  if (rc == 0) {
    unsigned want = s->off < s->len ? TAXI_EV_WRITE : TAXI_EV_READ;
    if (want != s->interest) {
      int m = taxi_reactor_modify(s->run->r, h, want);
      if (m == 0)
        s->interest = want;
      else
        st_server_error(s, m);
    }
  }
  atomic_store(&s->busy, 0);
  return rc;
}

static int st_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)ev;
  return st_serve(h, fd);
}

static int st_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  (void)ev;
  return st_serve(h, fd);
}

static void st_close(taxi_handler_t *h, taxi_handle_t fd) {
  st_server_t *s = ST_SRV(h);
  if (atomic_load(&s->busy)) atomic_store(&s->early_close, 1);
  atomic_fetch_add(&s->closes, 1);
  close(fd);
}

static const taxi_handler_ops_t st_ops = {
    .input = st_input, .output = st_output, .close = st_close};

/* ---- the clients --------------------------------------------------------- */

static void st_client_finish(st_client_t *c) { atomic_store(&c->finished, 1); }

/* Check n received bytes against the expected stream. */
static void st_verify(st_run_t *run, st_client_t *c, const unsigned char *p,
                      size_t n) {
  long msgs = 0;
  c->rx_bytes += n;
  if (c->rx_bytes > c->tx_bytes) c->bad++; /* more came back than went */
  while (n > 0) {
    if (c->rxoff == c->rxlen) {
      c->rxlen = st_frame(c->index, c->rx_seq, c->rxf);
      c->rxoff = 0;
    }
    size_t k = c->rxlen - c->rxoff;
    if (k > n) k = n;
    if (memcmp(p, c->rxf + c->rxoff, k) != 0) {
      int expected = -1;
      atomic_compare_exchange_strong(&run->first_bad_conn, &expected,
                                     (int)c->index);
      /* Out of step for good: give the connection up, so that the run
       * ends instead of waiting for what will never match. */
      c->bad++;
      c->eof = 1;
      st_client_finish(c);
      return;
    }
    c->rxoff += k;
    p += k;
    n -= k;
    if (c->rxoff == c->rxlen) {
      c->rx_seq++;
      msgs++;
    }
  }
  if (msgs) atomic_fetch_add(&run->verified, msgs);
  if (c->rx_seq == c->quota && c->rxoff == c->rxlen && !c->done) {
    c->done = 1;
    st_client_finish(c);
  }
}

static void st_client_read(st_run_t *run, st_client_t *c) {
  unsigned char buf[16384];
  for (;;) {
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) {
      st_verify(run, c, buf, (size_t)n);
      if (c->eof) return; /* given up: the stream was wrong */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    /* EOF or reset: only a removed connection ends so. */
    if (!atomic_load(&c->removed)) c->errs++;
    c->eof = 1;
    st_client_finish(c);
    return;
  }
}

static void st_client_write(st_run_t *run, st_client_t *c) {
  for (;;) {
    if (c->txoff == c->txlen) {
      if (c->tx_seq >= c->quota) return;
      if (c->tx_bytes - c->rx_bytes >= ST_WINDOW) return;
      c->txlen = st_frame(c->index, c->tx_seq, c->txf);
      c->txoff = 0;
      c->tx_seq++;
    }
    ssize_t n =
        send(c->fd, c->txf + c->txoff, c->txlen - c->txoff, MSG_NOSIGNAL);
    if (n > 0) {
      c->txoff += (size_t)n;
      c->tx_bytes += (uint64_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    /* The server end is closed: what it echoed before is still to be
     * read, up to EOF. */
    st_client_read(run, c);
    if (!c->eof) {
      c->errs++;
      c->eof = 1;
      st_client_finish(c);
    }
    return;
  }
}

static int st_wants_write(const st_client_t *c) {
  if (c->txoff < c->txlen) return 1;
  return c->tx_seq < c->quota && c->tx_bytes - c->rx_bytes < ST_WINDOW;
}

typedef struct st_client_thread {
  st_run_t *run;
  int lo, hi;
} st_client_thread_t;

static void st_client_main(void *arg) {
  st_client_thread_t *ct = arg;
  st_run_t *run = ct->run;
  int span = ct->hi - ct->lo;
  struct pollfd *pf = calloc((size_t)span + 1, sizeof *pf);
  int *map = calloc((size_t)span + 1, sizeof *map);
  if (!pf || !map) {
    free(pf);
    free(map);
    atomic_store(&run->timed_out, 1);
    return;
  }
  for (;;) {
    int n = 0;
    for (int i = ct->lo; i < ct->hi; i++) {
      st_client_t *c = &run->cli[i];
      if (c->eof || c->done) continue;
      pf[n].fd = c->fd;
      pf[n].events = POLLIN | (st_wants_write(c) ? POLLOUT : 0);
      pf[n].revents = 0;
      map[n++] = i;
    }
    if (n == 0) break;
    if (atomic_load(&run->stop_clients)) break;
    int rc = poll(pf, (nfds_t)n, 100);
    if (rc < 0 && errno != EINTR) {
      atomic_store(&run->timed_out, 1);
      break;
    }
    for (int k = 0; k < n && rc > 0; k++) {
      if (!pf[k].revents) continue;
      st_client_t *c = &run->cli[map[k]];
      if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) st_client_read(run, c);
      if (c->eof) continue;
      if (!c->eof && !c->done && (pf[k].revents & POLLOUT))
        st_client_write(run, c);
    }
  }
  free(pf);
  free(map);
}

/* ---- chaos: suspend, resume, remove -------------------------------------- */

static void st_pause_us(long us) {
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

static void st_chaos_main(void *arg) {
  st_run_t *run = arg;
  uint64_t rng = 0x5eed ^ (uint64_t)run->kind;
  while (!atomic_load(&run->stop_chaos)) {
    uint64_t x = pools_rand(&rng);
    long goal = (long)(run->removals + 1) * run->msgs /
                (long)(run->removals_wanted + 1);
    if (run->removals < run->removals_wanted &&
        atomic_load(&run->verified) >= goal) {
      /* Remove a connection still at work. */
      for (int tries = 0; tries < 64; tries++) {
        int i = (int)(pools_rand(&rng) % (uint64_t)run->conns);
        st_client_t *c = &run->cli[i];
        if (atomic_load(&c->removed) || atomic_load(&c->finished)) continue;
        atomic_store(&c->removed, 1);
        if (taxi_reactor_remove(run->r, &run->srv[i].h) != 0)
          run->chaos_errors++;
        break;
      }
      run->removals++;
      continue;
    }
    int i = (int)(x % (uint64_t)run->conns);
    if (atomic_load(&run->cli[i].removed)) continue;
    if (taxi_reactor_suspend(run->r, &run->srv[i].h) != 0) run->chaos_errors++;
    if ((x >> 20) % 4 == 0)
      st_pause_us((long)((x >> 24) % 300));
    else
      sched_yield();
    if (taxi_reactor_resume(run->r, &run->srv[i].h) != 0) run->chaos_errors++;
    run->suspends++;
    if ((x >> 40) % 8 == 0) st_pause_us(50);
  }
}

/* ---- one configuration --------------------------------------------------- */

static double st_timeout_scale(void) {
  const char *s = getenv("TAXI_TEST_TIMEOUT_SCALE");
  if (!s || !*s) return 1.0;
  double k = strtod(s, NULL);
  return k >= 1.0 ? k : 1.0;
}

static int st_do_lf_shutdown(void *p) { return taxi_lf_stop(p); }
static int st_do_lf_destroy(void *p) { return taxi_lf_destroy(p); }
static int st_do_hsha_shutdown(void *p) { return taxi_hsha_stop(p); }
static int st_do_hsha_destroy(void *p) { return taxi_hsha_destroy(p); }

static void st_stress(int kind) {
  static const char *const kind_names[] = {"lf (LIFO, one leader)",
                                           "lf (many leaders)", "hsha"};
  st_run_t *run = calloc(1, sizeof *run);
  CU_ASSERT_PTR_NOT_NULL_FATAL(run);
  run->kind = kind;
  run->conns = pools_small() ? ST_SMALL_CONNS : ST_FULL_CONNS;
  run->msgs = pools_small() ? ST_SMALL_MSGS : ST_FULL_MSGS;
  atomic_init(&run->verified, 0);
  atomic_init(&run->stop_chaos, 0);
  atomic_init(&run->timed_out, 0);
  atomic_init(&run->stop_clients, 0);
  atomic_init(&run->first_bad_conn, -1);

  taxi_backend_info_t info;
  CU_ASSERT_EQUAL_FATAL(pools_backend_info(&info), 0);
  int high = 0; /* move client ends above the backend's handle limit */
  if (info.max_handles) {
#if !defined(_WIN32)
    /* Windows handles are not numbers below a limit: nothing to move. */
    high = (int)info.max_handles;
#endif
    if ((size_t)run->conns + 64 > info.max_handles) {
      run->conns = (int)info.max_handles - 64;
      printf(
          "\n    %s: max_handles %zu (FD_SETSIZE): %d connections, server "
          "ends below %zu, client ends above; %ld messages\n    ",
          pools_backend, info.max_handles, run->conns, info.max_handles,
          run->msgs);
    }
  }
  unsigned long need = (unsigned long)(2 * run->conns + 128 + high);
  if (!util_raise_nofile(need)) {
    if (high) {
      /* Without room above the limit, both ends stay below it. */
      high = 0;
      run->conns = ((int)info.max_handles - 64) / 2;
      printf("\n    RLIMIT_NOFILE cannot reach %lu: %d connections only\n    ",
             need, run->conns);
    } else {
      printf("\n    RLIMIT_NOFILE cannot be raised to %lu\n", need);
      CU_FAIL_FATAL("RLIMIT_NOFILE too low for the stress test");
    }
  }
  run->removals_wanted = run->conns / 50;

  run->r = pools_reactor();
  if (kind == ST_LF_MANY && !pools_can_many_leaders(run->r)) {
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    o.leaders = TAXI_LEADERS_MANY;
    taxi_lf_pool_t *p = NULL;
    CU_ASSERT_EQUAL(taxi_lf_create(&p, run->r, &o), TAXI_ENOTSUP);
    printf("(not applicable: %s lacks TAXI_CAP_MULTI_WAIT|ONESHOT) ",
           pools_backend);
    CU_ASSERT_EQUAL(taxi_reactor_destroy(run->r), 0);
    free(run);
    return;
  }

  run->srv = calloc((size_t)run->conns, sizeof *run->srv);
  run->cli = calloc((size_t)run->conns, sizeof *run->cli);
  CU_ASSERT_FATAL(run->srv && run->cli);
  long per = run->msgs / run->conns, extra = run->msgs % run->conns;
  for (int i = 0; i < run->conns; i++) {
    int sv[2];
    pools_pair(sv);
    if (high) {
      int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, high + 64);
      if (moved < 0) {
        printf("\n    F_DUPFD above %d: %s\n", high, strerror(errno));
        CU_FAIL_FATAL("cannot move a client end above the handle limit");
      }
      close(sv[1]);
      sv[1] = moved;
    }
    st_server_t *s = &run->srv[i];
    st_client_t *c = &run->cli[i];
    s->fd = sv[0];
    s->index = i;
    s->run = run;
    s->interest = TAXI_EV_READ;
    atomic_init(&s->busy, 0);
    atomic_init(&s->overlaps, 0);
    atomic_init(&s->closes, 0);
    atomic_init(&s->early_close, 0);
    atomic_init(&s->errors, 0);
    atomic_init(&s->last_errno, 0);
    c->fd = sv[1];
    c->index = (uint32_t)i;
    c->quota = (uint32_t)(per + (i < extra ? 1 : 0));
    atomic_init(&c->removed, 0);
    atomic_init(&c->finished, 0);
    CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&s->h, &st_ops), 0);
    int rc = taxi_reactor_register(run->r, sv[0], &s->h, TAXI_EV_READ);
    if (rc != 0)
      printf("\n    register connection %d (fd %d): %s\n", i, sv[0],
             taxi_error_name(rc));
    CU_ASSERT_EQUAL_FATAL(rc, 0);
  }

  taxi_lf_pool_t *lp = NULL;
  taxi_hsha_pool_t *hp = NULL;
  if (kind == ST_HSHA) {
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = ST_THREADS;
    CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&hp, run->r, &o), 0);
  } else {
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    o.promotion = TAXI_PROMOTE_LIFO;
    o.leaders = kind == ST_LF_MANY ? TAXI_LEADERS_MANY : TAXI_LEADERS_ONE;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lp, run->r, &o), 0);
    CU_ASSERT_EQUAL(taxi_lf_spawn(lp, ST_THREADS), 0);
  }

  taxi_time_t start = taxi_now();
  double budget_s = ((double)ST_TIMEOUT_S - 40.0) * st_timeout_scale();
  run->deadline = start + (taxi_time_t)(budget_s * 1e9);
  util_thread_t chaos, clients[ST_CLIENTS];
  static st_client_thread_t ct[ST_CLIENTS];
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&chaos, st_chaos_main, run), 0);
  for (int k = 0; k < ST_CLIENTS; k++) {
    ct[k].run = run;
    ct[k].lo = run->conns * k / ST_CLIENTS;
    ct[k].hi = run->conns * (k + 1) / ST_CLIENTS;
    CU_ASSERT_EQUAL_FATAL(
        util_thread_start(&clients[k], st_client_main, &ct[k]), 0);
  }
  /* Watch: the run ends when the clients are done; it is stopped when it
   * passes its deadline or makes no progress for ST_STALL_MS (lost
   * messages would otherwise keep it waiting until the deadline). */
  long last = -1;
  taxi_time_t last_change = taxi_now();
  int stall_ms = (int)(ST_STALL_MS * st_timeout_scale());
  for (;;) {
    int running = 0;
    for (int k = 0; k < ST_CLIENTS; k++)
      if (!util_thread_done(&clients[k])) running++;
    if (!running) break;
    long v = atomic_load(&run->verified);
    if (v != last) {
      last = v;
      last_change = taxi_now();
    }
    if (taxi_now() > run->deadline || util_elapsed_ms(last_change) > stall_ms) {
      printf(
          "\n    no progress for %lld ms or past the deadline: stopping "
          "the clients\n    ",
          (long long)util_elapsed_ms(last_change));
      atomic_store(&run->timed_out, 1);
      atomic_store(&run->stop_clients, 1);
      break;
    }
    util_sleep_ms(20);
  }
  for (int k = 0; k < ST_CLIENTS; k++)
    util_thread_join(&clients[k], POOLS_WAIT_MS, "a stress client thread");
  int64_t elapsed = util_elapsed_ms(start);
  atomic_store(&run->stop_chaos, 1);
  util_thread_join(&chaos, POOLS_WAIT_MS, "the chaos thread");

  /* Stop the pool: every hook has returned when this returns. */
  char stats[200];
  if (hp) {
    CU_ASSERT_EQUAL(
        util_bounded(st_do_hsha_shutdown, hp, POOLS_WAIT_MS, "taxi_hsha_stop"),
        0);
    taxi_hsha_stats_t s;
    memset(&s, 0, sizeof s);
    CU_ASSERT_EQUAL(taxi_hsha_stats(hp, &s), 0);
    snprintf(stats, sizeof stats,
             "%llu events, %llu waits, max queued %u, %llu stalls",
             (unsigned long long)s.events, (unsigned long long)s.waits,
             s.max_queued, (unsigned long long)s.full_stalls);
    CU_ASSERT_EQUAL(util_bounded(st_do_hsha_destroy, hp, POOLS_WAIT_MS,
                                 "taxi_hsha_destroy"),
                    0);
  } else {
    CU_ASSERT_EQUAL(
        util_bounded(st_do_lf_shutdown, lp, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
    taxi_lf_stats_t s;
    memset(&s, 0, sizeof s);
    CU_ASSERT_EQUAL(taxi_lf_stats(lp, &s), 0);
    snprintf(stats, sizeof stats,
             "%llu events, %llu waits, %llu from pending, %llu promotions",
             (unsigned long long)s.events, (unsigned long long)s.waits,
             (unsigned long long)s.pending_taken,
             (unsigned long long)s.promotions);
    CU_ASSERT_EQUAL(
        util_bounded(st_do_lf_destroy, lp, POOLS_WAIT_MS, "taxi_lf_destroy"),
        0);
  }

  /* Per connection: the echoed stream was right, complete unless removed,
   * and (removed or not) everything the server echoed arrived. */
  long verified = 0, lost = 0, bad = 0, errs = 0, unfinished = 0;
  long srv_errors = 0, overlaps = 0, early = 0, removed = 0, short_rx = 0;
  int first_srv_errno = 0;
  for (int i = 0; i < run->conns; i++) {
    st_client_t *c = &run->cli[i];
    st_server_t *s = &run->srv[i];
    verified += c->rx_seq;
    bad += c->bad;
    errs += c->errs;
    overlaps += atomic_load(&s->overlaps);
    early += atomic_load(&s->early_close);
    if (atomic_load(&s->errors) && !first_srv_errno)
      first_srv_errno = atomic_load(&s->last_errno);
    srv_errors += atomic_load(&s->errors);
    if (atomic_load(&c->removed)) {
      removed++;
      if (c->rx_bytes != s->tx) short_rx++;
      if (atomic_load(&s->closes) != 1) lost++;
    } else {
      if (!c->done) unfinished++;
      if (c->rx_seq != c->quota || s->rx != c->tx_bytes || s->tx != c->rx_bytes)
        lost++;
    }
  }
  printf(
      "\n    %s: %d connections, %ld/%ld messages verified in %lld ms; "
      "%ld removed, %d suspend/resume; %s\n    ",
      kind_names[kind], run->conns, verified, run->msgs, (long long)elapsed,
      removed, run->suspends, stats);
  if (atomic_load(&run->timed_out))
    printf("STOPPED (deadline or no progress) ");
  if (bad || errs || lost || unfinished || srv_errors || overlaps || early ||
      short_rx || run->chaos_errors)
    printf(
        "bad %ld (first on connection %d), client errors %ld, lost %ld, "
        "unfinished %ld, server errors %ld (errno/code %d), overlaps %ld, "
        "early closes %ld, removed short %ld, chaos errors %d\n    ",
        bad, atomic_load(&run->first_bad_conn), errs, lost, unfinished,
        srv_errors, first_srv_errno, overlaps, early, short_rx,
        run->chaos_errors);
  CU_ASSERT_EQUAL(atomic_load(&run->timed_out), 0);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(errs, 0);
  CU_ASSERT_EQUAL(lost, 0);
  CU_ASSERT_EQUAL(unfinished, 0);
  CU_ASSERT_EQUAL(srv_errors, 0);
  CU_ASSERT_EQUAL(overlaps, 0);
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(short_rx, 0);
  CU_ASSERT_EQUAL(run->chaos_errors, 0);
  CU_ASSERT(run->suspends > 0);
  CU_ASSERT(removed > 0);
  CU_ASSERT(verified + (long)removed * (per + 1) >= run->msgs);

  /* Destroying the reactor closes the rest: each server end exactly once. */
  CU_ASSERT_EQUAL(taxi_reactor_destroy(run->r), 0);
  int closes_wrong = 0;
  for (int i = 0; i < run->conns; i++) {
    if (atomic_load(&run->srv[i].closes) != 1) closes_wrong++;
    close(run->cli[i].fd);
  }
  CU_ASSERT_EQUAL(closes_wrong, 0);
  free(run->srv);
  free(run->cli);
  free(run);
}

static void test_stress_lf(void) { st_stress(ST_LF_ONE); }
static void test_stress_lf_many(void) { st_stress(ST_LF_MANY); }
static void test_stress_hsha(void) { st_stress(ST_HSHA); }

static CU_TestInfo st_lf_tests[] = {
    {"exactly once: lf, LIFO, one leader", test_stress_lf},
    CU_TEST_INFO_NULL,
};
static CU_TestInfo st_lf_many_tests[] = {
    {"exactly once: lf, many leaders", test_stress_lf_many},
    CU_TEST_INFO_NULL,
};
static CU_TestInfo st_hsha_tests[] = {
    {"exactly once: hsha", test_stress_hsha},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t pools_suite_stress_lf = {"stress: lf", st_lf_tests,
                                                 ST_TIMEOUT_S, NULL};
const taxi_test_suite_t pools_suite_stress_lf_many = {
    "stress: lf many leaders", st_lf_many_tests, ST_TIMEOUT_S, NULL};
const taxi_test_suite_t pools_suite_stress_hsha = {
    "stress: hsha", st_hsha_tests, ST_TIMEOUT_S, NULL};
