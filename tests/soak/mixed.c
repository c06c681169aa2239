/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/soak/mixed.c - the mixed soak: connections opened and closed at
 * random while other threads remove handlers and add them back, under
 * every dispatcher (one thread running the reactor, an L/F pool of 8, an
 * HS/HA pool of 8 workers) over every readiness backend.
 *
 * SLOTS connection slots.  Client threads own the slots, half each: in a
 * loop they pick one of theirs and open it (a socket pair; the server end
 * registered with an echo handler), close it (the server sees EOF, its
 * hook returns -1 and the close hook closes the server end), or make a
 * round trip on it: send a message whose bytes depend on the slot, the
 * connection and the sequence number, and read back exactly those bytes.
 * Chaos threads meanwhile pick open slots and remove their handler from
 * the reactor (its close hook then leaves the descriptor open), and add it
 * back later, from their own thread; whatever the client sent meanwhile
 * waits in the socket and must come back once the handler is back.
 *
 * Checked: every round trip returns exactly the bytes sent, in order
 * (before a connection is closed, nothing more is pending: nothing was
 * echoed twice), within a time limit (nothing lost); every close hook runs
 * once per registration; every call returns what it should; and the run
 * did open, close, remove and re-add connections many times.
 *
 * Duration per configuration: TAXI_SOAK_SECONDS (default 2; 60 for the
 * long run), TAXI_TEST_SMALL halves it.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner.h"
#include "taxi/taxi.h"
#include "util.h"

#define SLOTS 64
#define CLIENTS 2
#define CHAOS 2
#define POOL_THREADS 8
#define MAX_MSG 700
#define SERVER_BUF 4096
#define ROUND_TRIP_MS 10000 /* a reply not back by then is lost */

enum { DISPATCH_REACTOR, DISPATCH_LF, DISPATCH_HSHA };
static const char *const dispatch_names[] = {"reactor", "lf", "hsha"};

/* A slot's state.  Client and chaos threads change it under the slot's
 * mutex; the close hook, which runs in a dispatching thread, only with a
 * compare-and-swap (it must not wait for a mutex that a thread inside
 * taxi_reactor_remove() may hold). */
enum {
  SLOT_CLOSED,    /* no connection */
  SLOT_OPEN,      /* registered */
  SLOT_CLOSING,   /* the client closed its end: the hook will see EOF */
  SLOT_DETACHING, /* being removed by a chaos thread */
  SLOT_DETACHED   /* removed, descriptors open, to be added back */
};

typedef struct run run_t;

typedef struct slot {
  taxi_handler_t h;
  pthread_mutex_t lock;
  atomic_int state;
  int fd, peer;       /* server end, client end */
  unsigned long conn; /* connection number, for the message bytes */
  uint32_t seq;       /* client: round trips made on this connection */
  /* The echo handler's buffer: bytes read but not yet written back.  Only
   * the slot's hooks touch it, never two at once; it survives a removal. */
  unsigned char buf[SERVER_BUF];
  size_t len, off;
  unsigned interest;
  run_t *run;
} slot_t;

struct run {
  taxi_reactor_t *r;
  slot_t slots[SLOTS];
  atomic_int stop;       /* clients: stop */
  atomic_int stop_chaos; /* after the clients: a round trip on a detached
                            slot needs a chaos thread to add it back */
  atomic_int ending;     /* destroy closes what is still open: expected */
  atomic_long round_trips, opens, closes, removes, readds;
  atomic_long errors;
  atomic_long unexpected_closes;
  char first_error[160];
  pthread_mutex_t error_lock;
  atomic_ulong next_conn;
};

static void fail(run_t *run, const char *fmt, int slot, long a) {
  if (atomic_fetch_add(&run->errors, 1) == 0) {
    pthread_mutex_lock(&run->error_lock);
    snprintf(run->first_error, sizeof run->first_error, fmt, slot, a);
    pthread_mutex_unlock(&run->error_lock);
  }
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* ---- the server side: echo ------------------------------------------------
 */

#define SLOT(hp) TAXI_CONTAINER_OF(hp, slot_t, h)

/* Write back what is buffered: 1 done, 0 would block, -1 error. */
static int flush(slot_t *s, int fd) {
  while (s->off < s->len) {
    ssize_t n = send(fd, s->buf + s->off, s->len - s->off, MSG_NOSIGNAL);
    if (n > 0) {
      s->off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  s->off = s->len = 0;
  return 1;
}

static int echo(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  slot_t *s = SLOT(h);
  (void)ev;
  for (int i = 0; i < 8; i++) {
    int f = flush(s, fd);
    if (f < 0) return -1;
    if (f == 0) break;
    ssize_t n = recv(fd, s->buf, sizeof s->buf, 0);
    if (n > 0) {
      s->len = (size_t)n;
      s->off = 0;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return -1; /* EOF: the client closed; or an error */
  }
  unsigned want = s->off < s->len ? TAXI_EV_WRITE : TAXI_EV_READ;
  if (want != s->interest) {
    int rc = taxi_reactor_modify(s->run->r, h, want);
    /* A chaos thread may be removing the handler while this hook runs: it
     * set DETACHING before its taxi_reactor_remove(), and the state stays
     * so until the close hook, which waits for this hook to return.  Then
     * ENOENT is the documented answer; the handler is added back with
     * the interest its buffer needs (attach()). */
    if (rc == TAXI_ENOENT && atomic_load(&s->state) == SLOT_DETACHING) return 0;
    if (rc < 0) {
      fail(s->run, "slot %d: taxi_reactor_modify: %ld",
           (int)(s - s->run->slots), rc);
      return -1;
    }
    s->interest = want;
  }
  return 0;
}

/* The descriptor is closed before the state says CLOSED: from then on the
 * client may open the slot again and reuse its fields. */
static void on_close(taxi_handler_t *h, taxi_handle_t fd) {
  slot_t *s = SLOT(h);
  int expected = SLOT_DETACHING;
  if (atomic_compare_exchange_strong(&s->state, &expected, SLOT_DETACHED))
    return; /* removed by a chaos thread: it will add it back */
  close(fd);
  if (atomic_load(&s->state) == SLOT_CLOSING) {
    atomic_fetch_add(&s->run->closes, 1);
    atomic_store(&s->state, SLOT_CLOSED);
    return;
  }
  /* Closed while open: by destroy at the end (the clients are gone);
   * otherwise after an error the echo met, which ends the run. */
  if (atomic_load(&s->run->ending)) {
    close(s->peer);
    atomic_store(&s->state, SLOT_CLOSED);
    return;
  }
  atomic_fetch_add(&s->run->unexpected_closes, 1);
  fail(s->run, "slot %d: closed while open (%ld)", (int)(s - s->run->slots), 0);
}

static const taxi_handler_ops_t echo_ops = {
    .input = echo, .output = echo, .close = on_close};

/* Register the slot's server end; under the slot's mutex. */
static int attach(slot_t *s) {
  taxi_handler_init(&s->h, &echo_ops);
  s->interest = s->off < s->len ? TAXI_EV_WRITE : TAXI_EV_READ;
  atomic_store(&s->state, SLOT_OPEN);
  return taxi_reactor_register(s->run->r, s->fd, &s->h, s->interest);
}

/* ---- the client side -------------------------------------------------------
 */

static size_t message(slot_t *s, unsigned char *out) {
  uint64_t x = (s->conn << 32) ^ s->seq ^ 0x9E3779B97F4A7C15ull;
  size_t len = 1 + (size_t)(next_rand(&x) % MAX_MSG);
  for (size_t i = 0; i < len; i++) out[i] = (unsigned char)next_rand(&x);
  return len;
}

static void open_slot(run_t *run, slot_t *s) {
  int sv[2];
  if (util_socketpair(sv) != 0) {
    fail(run, "slot %d: socketpair: errno %ld", (int)(s - run->slots), errno);
    return;
  }
  s->fd = sv[0];
  s->peer = sv[1];
  s->conn = atomic_fetch_add(&run->next_conn, 1);
  s->seq = 0;
  s->len = s->off = 0;
  int rc = attach(s);
  if (rc < 0) {
    fail(run, "slot %d: register: %ld", (int)(s - run->slots), rc);
    close(sv[0]);
    close(sv[1]);
    atomic_store(&s->state, SLOT_CLOSED);
    return;
  }
  atomic_fetch_add(&run->opens, 1);
}

/* Close the client's end (under the slot's mutex).  Nothing may be
 * waiting to be read first: an echo that came twice would be.  An open
 * slot's server end is closed by its close hook once the echo sees EOF; a
 * detached one's here. */
static void close_slot(run_t *run, slot_t *s, int state) {
  unsigned char b;
  ssize_t n = recv(s->peer, &b, 1, MSG_DONTWAIT);
  if (n > 0)
    fail(run, "slot %d: %ld bytes more than were sent", (int)(s - run->slots),
         (long)n);
  if (state == SLOT_DETACHED) {
    close(s->fd);
    close(s->peer);
    atomic_store(&s->state, SLOT_CLOSED);
    atomic_fetch_add(&run->closes, 1);
    return;
  }
  atomic_store(&s->state, SLOT_CLOSING);
  close(s->peer);
}

static void round_trip(run_t *run, slot_t *s) {
  unsigned char out[MAX_MSG], in[MAX_MSG];
  size_t len = message(s, out), sent = 0, got = 0;
  int slot = (int)(s - run->slots);
  taxi_time_t start = taxi_now();
  while (got < len) {
    if (sent < len) {
      ssize_t n = send(s->peer, out + sent, len - sent, MSG_NOSIGNAL);
      if (n > 0)
        sent += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail(run, "slot %d: send: errno %ld", slot, errno);
        return;
      }
    }
    struct pollfd p = {s->peer, POLLIN | (sent < len ? POLLOUT : 0), 0};
    poll(&p, 1, 50);
    ssize_t n = recv(s->peer, in + got, len - got, MSG_DONTWAIT);
    if (n > 0) {
      if (memcmp(in + got, out + got, (size_t)n) != 0) {
        fail(run, "slot %d: wrong bytes at round trip %ld", slot, s->seq);
        return;
      }
      got += (size_t)n;
    } else if (n == 0) {
      fail(run, "slot %d: EOF at round trip %ld", slot, s->seq);
      return;
    }
    if (util_elapsed_ms(start) > ROUND_TRIP_MS) {
      fail(run, "slot %d: reply lost at round trip %ld", slot, s->seq);
      return;
    }
  }
  s->seq++;
  atomic_fetch_add(&run->round_trips, 1);
}

typedef struct worker {
  run_t *run;
  int index;
} worker_t;

static void client_main(void *arg) {
  worker_t *w = arg;
  run_t *run = w->run;
  uint64_t rng = 0x1234567ull + (uint64_t)w->index * 7919;
  while (!atomic_load(&run->stop) && !atomic_load(&run->errors)) {
    uint64_t x = next_rand(&rng);
    int i = (int)(x % (SLOTS / CLIENTS)) * CLIENTS + w->index;
    slot_t *s = &run->slots[i];
    pthread_mutex_lock(&s->lock);
    int st = atomic_load(&s->state);
    unsigned what = (unsigned)(x >> 32) % 100;
    if (st == SLOT_CLOSED)
      open_slot(run, s);
    else if ((st == SLOT_OPEN || st == SLOT_DETACHED) && what < 8 && s->seq)
      close_slot(run, s, st);
    else if (st == SLOT_OPEN || st == SLOT_DETACHED) {
      /* A round trip on a detached slot completes once a chaos thread has
       * added it back: release the slot meanwhile. */
      pthread_mutex_unlock(&s->lock);
      round_trip(run, s);
      continue;
    }
    pthread_mutex_unlock(&s->lock);
  }
}

/* ---- chaos: remove handlers and add them back ---------------------------- */

/* Remove a random open slot's handler, and add it back a moment later
 * (a slot found detached is added back at once).  A round trip waiting on
 * a removed handler resumes when it is back. */
static void chaos_main(void *arg) {
  worker_t *w = arg;
  run_t *run = w->run;
  uint64_t rng = 0xabcdef1ull + (uint64_t)w->index * 104729;
  while (!atomic_load(&run->stop_chaos)) {
    uint64_t x = next_rand(&rng);
    int i = (int)(x % SLOTS);
    slot_t *s = &run->slots[i];
    pthread_mutex_lock(&s->lock);
    int removed = 0;
    if (atomic_load(&s->state) == SLOT_OPEN) {
      atomic_store(&s->state, SLOT_DETACHING);
      int rc = taxi_reactor_remove(run->r, &s->h);
      if (rc < 0) fail(run, "slot %d: taxi_reactor_remove: %ld", i, rc);
      atomic_fetch_add(&run->removes, 1);
      removed = 1;
    }
    pthread_mutex_unlock(&s->lock);
    if (removed) util_sleep_ms(1 + (long)((x >> 40) % 2));
    pthread_mutex_lock(&s->lock);
    /* The close hook may still be on its way (DETACHING): then the next
     * visit adds it back. */
    if (atomic_load(&s->state) == SLOT_DETACHED) {
      int rc = attach(s);
      if (rc < 0) fail(run, "slot %d: register again: %ld", i, rc);
      atomic_fetch_add(&run->readds, 1);
    }
    pthread_mutex_unlock(&s->lock);
    if (!removed) sched_yield();
  }
}

/* ---- one configuration --------------------------------------------------- */

static void dispatch_main(void *arg) {
  run_t *run = arg;
  int rc = taxi_reactor_run(run->r);
  if (rc != TAXI_ESTOPPED) fail(run, "slot %d: taxi_reactor_run: %ld", -1, rc);
}

static int do_lf_destroy(void *p) { return taxi_lf_destroy(p); }
static int do_hsha_destroy(void *p) { return taxi_hsha_destroy(p); }

/* What the run did, and its first error. */
static void report(run_t *run, const char *dispatcher, const char *backend,
                   long ms) {
  printf(
      "\n    %s over %s, %ld ms: %ld round trips, %ld opened, %ld closed, "
      "%ld removed, %ld added back\n    ",
      dispatcher, backend, ms, atomic_load(&run->round_trips),
      atomic_load(&run->opens), atomic_load(&run->closes),
      atomic_load(&run->removes), atomic_load(&run->readds));
  if (atomic_load(&run->errors))
    printf("%ld errors, the first: %s\n    ", atomic_load(&run->errors),
           run->first_error);
  fflush(stdout);
}

/* Join t, or report the run before ending the process as hung: a thread
 * stuck at the end may be the consequence of an earlier error (a reply
 * lost because the dispatcher stopped), which the report then shows. */
static void join(run_t *run, util_thread_t *t, int limit, const char *what,
                 const char *dispatcher, const char *backend, long ms) {
  if (!util_wait_flag(&t->done, 1, limit)) report(run, dispatcher, backend, ms);
  util_thread_join(t, 0, what);
}

static long soak_ms(void) {
  const char *s = getenv("TAXI_SOAK_SECONDS");
  long secs = s && *s ? strtol(s, NULL, 10) : 2;
  if (secs < 1) secs = 1;
  long ms = secs * 1000;
  return util_test_small() ? ms / 2 : ms;
}

static void soak(const char *backend, int dispatcher) {
  const char *dname = dispatch_names[dispatcher];
  run_t *run = calloc(1, sizeof *run);
  CU_ASSERT_PTR_NOT_NULL_FATAL(run);
  pthread_mutex_init(&run->error_lock, NULL);
  for (int i = 0; i < SLOTS; i++) {
    pthread_mutex_init(&run->slots[i].lock, NULL);
    atomic_init(&run->slots[i].state, SLOT_CLOSED);
    run->slots[i].run = run;
  }
  CU_ASSERT_EQUAL_FATAL(util_reactor_create(&run->r, backend), 0);

  taxi_lf_pool_t *lf = NULL;
  taxi_hsha_pool_t *hsha = NULL;
  util_thread_t dispatch;
  if (dispatcher == DISPATCH_LF) {
    taxi_lf_options_t o = TAXI_LF_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(taxi_lf_create(&lf, run->r, &o), 0);
    CU_ASSERT_EQUAL_FATAL(taxi_lf_spawn(lf, POOL_THREADS), 0);
  } else if (dispatcher == DISPATCH_HSHA) {
    taxi_hsha_options_t o = TAXI_HSHA_OPTIONS_INIT;
    o.workers = POOL_THREADS;
    CU_ASSERT_EQUAL_FATAL(taxi_hsha_create(&hsha, run->r, &o), 0);
  } else {
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&dispatch, dispatch_main, run), 0);
  }

  worker_t clients[CLIENTS], chaos[CHAOS];
  util_thread_t client_threads[CLIENTS], chaos_threads[CHAOS];
  for (int i = 0; i < CLIENTS; i++) {
    clients[i].run = run;
    clients[i].index = i;
    CU_ASSERT_EQUAL_FATAL(
        util_thread_start(&client_threads[i], client_main, &clients[i]), 0);
  }
  for (int i = 0; i < CHAOS; i++) {
    chaos[i].run = run;
    chaos[i].index = i;
    CU_ASSERT_EQUAL_FATAL(
        util_thread_start(&chaos_threads[i], chaos_main, &chaos[i]), 0);
  }
  long ms = soak_ms();
  taxi_time_t start = taxi_now();
  while (util_elapsed_ms(start) < ms && !atomic_load(&run->errors))
    util_sleep_ms(20);
  atomic_store(&run->stop, 1);
  int limit = 4 * ROUND_TRIP_MS;
  for (int i = 0; i < CLIENTS; i++)
    join(run, &client_threads[i], limit, "a client thread", dname, backend, ms);
  atomic_store(&run->stop_chaos, 1);
  for (int i = 0; i < CHAOS; i++)
    join(run, &chaos_threads[i], limit, "a chaos thread", dname, backend, ms);

  /* Wind down: the pool's threads first, then destroy closes whatever is
   * still registered; detached slots are closed here. */
  atomic_store(&run->ending, 1);
  if (lf)
    CU_ASSERT_EQUAL(util_bounded(do_lf_destroy, lf, limit, "taxi_lf_destroy"),
                    0);
  if (hsha)
    CU_ASSERT_EQUAL(
        util_bounded(do_hsha_destroy, hsha, limit, "taxi_hsha_destroy"), 0);
  if (dispatcher == DISPATCH_REACTOR) {
    CU_ASSERT_EQUAL(taxi_reactor_stop(run->r), 0);
    join(run, &dispatch, limit, "the dispatching thread", dname, backend, ms);
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(run->r), 0);
  for (int i = 0; i < SLOTS; i++) {
    slot_t *s = &run->slots[i];
    int st = atomic_load(&s->state);
    if (st == SLOT_DETACHED) {
      close(s->fd);
      close(s->peer);
    } else if (st != SLOT_CLOSED) {
      fail(run, "slot %d: state %ld after destroy", i, st);
    }
    pthread_mutex_destroy(&s->lock);
  }

  report(run, dname, backend, ms);
  CU_ASSERT_EQUAL(atomic_load(&run->errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&run->unexpected_closes), 0);
  CU_ASSERT(atomic_load(&run->round_trips) > 0);
  CU_ASSERT(atomic_load(&run->closes) > 0);
  CU_ASSERT(atomic_load(&run->removes) > 0);
  CU_ASSERT(atomic_load(&run->readds) > 0);
  pthread_mutex_destroy(&run->error_lock);
  free(run);
}

/* ---- suites: backend x dispatcher ---------------------------------------- */

#define MAX_BACKENDS 6
static const char *backends[MAX_BACKENDS];

#define SOAK_FNS(i)                                                           \
  static void test_reactor_##i(void) { soak(backends[i], DISPATCH_REACTOR); } \
  static void test_lf_##i(void) { soak(backends[i], DISPATCH_LF); }           \
  static void test_hsha_##i(void) { soak(backends[i], DISPATCH_HSHA); }
SOAK_FNS(0)
SOAK_FNS(1)
SOAK_FNS(2)
SOAK_FNS(3)
SOAK_FNS(4)
SOAK_FNS(5)
#define SOAK_ROW(i) \
  { test_reactor_##i, test_lf_##i, test_hsha_##i }
static void (*const soak_fns[MAX_BACKENDS][3])(void) = {
    SOAK_ROW(0), SOAK_ROW(1), SOAK_ROW(2),
    SOAK_ROW(3), SOAK_ROW(4), SOAK_ROW(5)};

int main(int argc, char **argv) {
  const char *names[16];
  int n = taxi_backend_names(names, 16);
  static char titles[MAX_BACKENDS][48];
  static CU_TestInfo tests[MAX_BACKENDS][4];
  static taxi_test_suite_t suites[MAX_BACKENDS];
  const taxi_test_suite_t *list[MAX_BACKENDS];
  size_t k = 0;
  unsigned timeout = (unsigned)(3 * soak_ms() / 1000 + 120);
  for (int i = 0; i < n && i < 16 && k < MAX_BACKENDS; i++) {
    /* APR's backends allow one waiter and no change during a wait; the
     * pools suites cover them. */
    if (strncmp(names[i], "apr", 3) == 0) continue;
    backends[k] = names[i];
    snprintf(titles[k], sizeof titles[k], "mixed soak: %s", names[i]);
    static const char *const test_names[] = {
        "reactor, one thread: open, close, remove, add back",
        "lf, 8 threads: open, close, remove, add back",
        "hsha, 8 workers: open, close, remove, add back"};
    for (int d = 0; d < 3; d++) {
      tests[k][d].pName = test_names[d];
      tests[k][d].pTestFunc = soak_fns[k][d];
    }
    tests[k][3].pName = NULL;
    tests[k][3].pTestFunc = NULL;
    suites[k].name = titles[k];
    suites[k].tests = tests[k];
    suites[k].timeout_s = timeout;
    suites[k].skip = NULL;
    list[k] = &suites[k];
    k++;
  }
  return taxi_test_run("mixed soak", list, k, argc, argv);
}
