/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/lf_pool.c - the Leader/Followers pool at work: growing and
 * shrinking, removal during dispatch, timers and notifications in the
 * pool's threads, the counters (tests of the "lf" suite, in lf.c).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

/* ---- growing and shrinking ----------------------------------------------- */

void test_grow_and_shrink(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 4, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  CU_ASSERT(lf_wait_shape(t->p, 2, -1, -1));
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 4));
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  CU_ASSERT(lf_wait_shape(t->p, 5, -1, -1));
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 8));
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 3), 0);
  /* shrink returns once they have left. */
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_bytes(t, 8 + 4 * (round + 1)));
  }
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 2);
  taxi_lf_thread_stats_t ts[8];
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 8), 5);
  int active = 0;
  for (int i = 0; i < 5; i++) active += ts[i].active;
  CU_ASSERT_EQUAL(active, 2);
  /* Down to none, and up again. */
  CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 2), 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 0);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  for (int i = 0; i < 4; i++) util_write_byte(t->conn[i].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 8 + 80 + 4));
  pool_free(t);
}

/* The virtual memory of this process in kB, or -1 where it cannot be read
 * (only Linux's /proc/self/status is read). */
static long lf_vm_kb(void) {
  long kb = -1;
#ifdef __linux__
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kb = strtol(line + 7, NULL, 10);
  fclose(f);
#endif
  return kb;
}

/* Threads that shrink let go are gone for good: 200 spawn/shrink cycles on
 * a running pool do not pile up 200 finished but unjoined threads (each
 * holding its stack until taxi_lf_destroy).  Measured as the process's
 * virtual size, where the OS tells it. */
void test_shrink_releases_threads(void) {
  enum { CYCLES = 200 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 1, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
  for (int i = 0; i < 10; i++) {
    CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 1), 0);
    CU_ASSERT_EQUAL(taxi_lf_shrink(t->p, 1), 0);
  }
  long before = lf_vm_kb();
  int failed = 0;
  for (int i = 0; i < CYCLES && !failed; i++) {
    int a = taxi_lf_spawn(t->p, 1);
    int b = a == 0 ? taxi_lf_shrink(t->p, 1) : 0;
    if (a != 0 || b != 0) {
      printf("\n    cycle %d: spawn %s, shrink %s\n", i, taxi_error_name(a),
             taxi_error_name(b));
      failed = 1;
    }
  }
  long after = lf_vm_kb();
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT_EQUAL(lf_stats(t->p).threads, 1);
  /* Still dispatching. */
  util_write_byte(t->conn[0].sv[1]);
  CU_ASSERT(pool_wait_bytes(t, 1));
  if (before < 0 || after < 0) {
    printf("(virtual size not known here: only the calls were checked) ");
  } else {
    printf("(VmSize %ld kB before, %ld kB after %d spawn/shrink) ", before,
           after, CYCLES);
    /* One 8 MB stack per cycle would be 1.6 GB; allow the C library's
     * stack cache and the thread records (kept by contract). */
    CU_ASSERT(after - before < 256L * 1024);
  }
  pool_free(t);
}

/* ---- removal while dispatched -------------------------------------------- */

/* Block until the remover has called taxi_reactor_remove, linger a little,
 * then return t->hook_ret. */
static int lf_remove_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  pool_test_t *t = c->t;
  (void)ev;
  atomic_store(&c->busy, 1);
  atomic_fetch_add(&c->bytes, pools_drain(fd));
  atomic_fetch_add(&c->inputs, 1);
  atomic_fetch_add(&t->gate.entered, 1);
  if (!util_wait_flag(&t->removed, 1, POOLS_WAIT_MS))
    atomic_fetch_add(&t->gate.timeouts, 1);
  util_sleep_ms(20); /* room for a close hook that would run too early */
  atomic_store(&c->hook_done, 1);
  atomic_store(&c->busy, 0);
  return t->hook_ret;
}

static const taxi_handler_ops_t lf_remove_ops = {.input = lf_remove_input,
                                                 .close = pool_conn_close};

static void lf_remove_during_dispatch(int hook_ret) {
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, 2, &lf_remove_ops);
  t->hook_ret = hook_ret;
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 2), 0);
  pool_conn_t *c = &t->conn[0];
  CU_ASSERT_EQUAL(util_write_byte(c->sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->gate.entered, 1, POOLS_WAIT_MS));
  int rc = taxi_reactor_remove(t->r, &c->h);
  int closes_at_remove = atomic_load(&c->closes);
  atomic_store(&t->removed, 1);
  CU_ASSERT_EQUAL(rc, 0);
  /* The hook is still running: the close hook waits for it. */
  CU_ASSERT_EQUAL(closes_at_remove, 0);
  CU_ASSERT(pools_wait_count(&c->closes, 1, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(atomic_load(&c->hook_done), 1);
  CU_ASSERT_EQUAL(atomic_load(&c->early_close), 0);
  /* No hook after removal, the close hook once; the other handler works. */
  CU_ASSERT_EQUAL(util_write_byte(c->sv[1]), 1);
  CU_ASSERT_EQUAL(util_write_byte(t->conn[1].sv[1]), 1);
  CU_ASSERT(pools_wait_count(&t->conn[1].inputs, 1, POOLS_WAIT_MS));
  util_sleep_ms(20);
  CU_ASSERT_EQUAL(atomic_load(&c->inputs), 1);
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &c->h), TAXI_ENOENT);
  CU_ASSERT(lf_wait_idle(t->p, 2));
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  pool_teardown(t);
  /* Destroying the reactor did not close it again. */
  CU_ASSERT_EQUAL(atomic_load(&c->closes), 1);
  free(t);
}

/* Removed from another thread while its hook runs in a pool thread: the
 * close hook runs exactly once, after the hook returned. */
void test_remove_while_dispatched(void) { lf_remove_during_dispatch(0); }

/* The same while the hook, too, asks for removal (returns -1). */
void test_remove_while_hook_removes(void) { lf_remove_during_dispatch(-1); }

/* Close hook that closes the handle: removal of many handlers from a test
 * thread while the pool dispatches them; each closes exactly once and no
 * hook runs on a closed handle. */
static int lf_busy_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  (void)ev;
  if (atomic_exchange(&c->busy, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) {
    atomic_fetch_add(&c->bytes, (long)n);
    /* Answer, so that the writer keeps going. */
    if (write(fd, buf, (size_t)n) < 0) {
    }
  } else if (n < 0 && errno == EBADF) {
    atomic_fetch_add(&c->t->bad_thread, 1); /* a hook on a closed handle */
  }
  sched_yield();
  atomic_fetch_add(&c->inputs, 1);
  atomic_store(&c->busy, 0);
  return 0;
}

static void lf_closing_close(taxi_handler_t *h, taxi_handle_t fd) {
  pool_conn_t *c = POOL_CONN(h);
  if (atomic_load(&c->busy)) atomic_store(&c->early_close, 1);
  atomic_fetch_add(&c->closes, 1);
  close(fd);
  c->sv[0] = -1;
}

static const taxi_handler_ops_t lf_closing_ops = {.input = lf_busy_input,
                                                  .close = lf_closing_close};

typedef struct lf_pinger {
  pool_test_t *t;
  atomic_int stop;
} lf_pinger_t;

/* Keep writing to every peer whose handler was not removed yet. */
static void lf_pinger_main(void *arg) {
  lf_pinger_t *pg = arg;
  pool_test_t *t = pg->t;
  char buf[64];
  memset(buf, 'p', sizeof buf);
  while (!atomic_load(&pg->stop)) {
    for (int i = 0; i < t->nconns; i++) {
      if (write(t->conn[i].sv[1], buf, 1 + (size_t)(i % 60)) < 0) {
      }
      pools_drain(t->conn[i].sv[1]);
    }
    sched_yield();
  }
}

void test_remove_many_while_busy(void) {
  enum { N = 48 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, N, &lf_closing_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  static lf_pinger_t pg;
  pg.t = t;
  atomic_init(&pg.stop, 0);
  util_thread_t pt;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&pt, lf_pinger_main, &pg), 0);
  /* Let traffic flow, then remove them one by one. */
  CU_ASSERT(pools_wait_count(&t->conn[N - 1].inputs, 1, POOLS_WAIT_MS));
  int bad_rc = 0;
  for (int i = 0; i < N; i++) {
    pools_wait_count(&t->conn[i].inputs, 1, 100);
    if (taxi_reactor_remove(t->r, &t->conn[i].h) != 0) bad_rc++;
    if (i % 4 == 0) util_sleep_ms(1);
  }
  int closes = 0, early = 0, overlaps = 0;
  taxi_time_t start = taxi_now();
  for (;;) {
    closes = 0;
    for (int i = 0; i < N; i++) closes += atomic_load(&t->conn[i].closes);
    if (closes >= N || util_elapsed_ms(start) > POOLS_WAIT_MS) break;
    util_sleep_ms(1);
  }
  atomic_store(&pg.stop, 1);
  util_thread_join(&pt, POOLS_WAIT_MS, "the writer thread");
  for (int i = 0; i < N; i++) {
    early += atomic_load(&t->conn[i].early_close);
    overlaps += atomic_load(&t->conn[i].overlaps);
  }
  CU_ASSERT_EQUAL(bad_rc, 0);
  CU_ASSERT_EQUAL(closes, N);
  CU_ASSERT_EQUAL(early, 0);
  CU_ASSERT_EQUAL(overlaps, 0);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  pool_teardown(t);
  /* Destroying the reactor closed nothing twice. */
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(atomic_load(&t->conn[i].closes), 1);
  free(t);
}

/* ---- timers and notifications -------------------------------------------- */

typedef struct lf_timed {
  taxi_handler_t h;
  taxi_timer_t timer;
  pool_test_t *t;
  atomic_int fires;
  atomic_int busy;
  atomic_int overlaps;
  atomic_int closes;
} lf_timed_t;

static int lf_timed_timeout(taxi_handler_t *h, taxi_timer_t *timer, void *act) {
  lf_timed_t *x = TAXI_CONTAINER_OF(h, lf_timed_t, h);
  (void)timer;
  (void)act;
  if (atomic_exchange(&x->busy, 1) != 0) atomic_fetch_add(&x->overlaps, 1);
  lf_note_thread(x->t);
  atomic_fetch_add(&x->fires, 1);
  util_sleep_ms(1); /* longer than the period */
  atomic_store(&x->busy, 0);
  return 0;
}

static void lf_timed_close(taxi_handler_t *h, taxi_handle_t fd) {
  (void)fd;
  atomic_fetch_add(&TAXI_CONTAINER_OF(h, lf_timed_t, h)->closes, 1);
}

static const taxi_handler_ops_t lf_timed_ops = {.timeout = lf_timed_timeout,
                                                .close = lf_timed_close};

static atomic_int lf_notes_run;
static atomic_int lf_note_count[1000];
static pool_test_t *lf_note_test;

static void lf_note_fn(void *arg) {
  int i = (int)(intptr_t)arg;
  lf_note_thread(lf_note_test);
  if (i >= 0 && i < 1000) atomic_fetch_add(&lf_note_count[i], 1);
  atomic_fetch_add(&lf_notes_run, 1);
}

/* The pool dispatches timers too: a periodic timer whose hook outlasts
 * its period fires in pool threads, never twice at once, and stops when
 * cancelled. */
void test_timers_in_pool(void) {
  pool_test_t *t = pool_new(&pool_row_lf);
  static lf_timed_t x;
  memset(&x, 0, sizeof x);
  x.t = t;
  atomic_init(&x.fires, 0);
  atomic_init(&x.busy, 0);
  atomic_init(&x.overlaps, 0);
  atomic_init(&x.closes, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_handler_init(&x.h, &lf_timed_ops), 0);
  CU_ASSERT_EQUAL_FATAL(taxi_timer_init(&x.timer), 0);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(t->r, &x.timer, &x.h, 0,
                                        TAXI_NSEC_PER_MSEC / 5, NULL),
                  0);
  CU_ASSERT(pools_wait_count(&x.fires, 30, POOLS_WAIT_MS));
  CU_ASSERT_EQUAL(taxi_reactor_cancel(t->r, &x.timer), 0);
  /* A hook running now completes, and one a pool thread had already taken
   * from the heap (its hook not yet entered) may still run: at most one
   * more, since the timer is re-armed only after its hook returns. */
  int at_cancel = atomic_load(&x.fires);
  /* Still attached (by its timer) until removed; then it closes once,
   * after every dispatch in flight: no hook can run after the close. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(t->r, &x.h), 0);
  CU_ASSERT(pools_wait_count(&x.closes, 1, POOLS_WAIT_MS));
  int fires = atomic_load(&x.fires);
  CU_ASSERT(fires <= at_cancel + 1);
  util_sleep_ms(30);
  CU_ASSERT_EQUAL(atomic_load(&x.fires), fires);
  CU_ASSERT_EQUAL(atomic_load(&x.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  pool_free(t);
  CU_ASSERT_EQUAL(atomic_load(&x.closes), 1);
}

/* Notifications posted from another thread run in pool threads, each
 * exactly once. */
void test_notifications_in_pool(void) {
  enum { N = 1000 };
  pool_test_t *t = pool_new(&pool_row_lf);
  lf_note_test = t;
  atomic_store(&lf_notes_run, 0);
  for (int i = 0; i < N; i++) atomic_store(&lf_note_count[i], 0);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 3), 0);
  int post_failed = 0;
  for (int i = 0; i < N; i++)
    if (taxi_reactor_notify(t->r, lf_note_fn, (void *)(intptr_t)i) != 0)
      post_failed++;
  CU_ASSERT_EQUAL(post_failed, 0);
  CU_ASSERT(pools_wait_count(&lf_notes_run, N, POOLS_WAIT_MS));
  util_sleep_ms(10);
  int wrong = 0;
  for (int i = 0; i < N; i++)
    if (atomic_load(&lf_note_count[i]) != 1) wrong++;
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(atomic_load(&lf_notes_run), N);
  CU_ASSERT_EQUAL(atomic_load(&t->bad_thread), 0);
  CU_ASSERT(atomic_load(&t->seen) != 0);
  pool_free(t);
}

/* ---- counters ------------------------------------------------------------ */

/* For a workload of handle events only, the per-thread event counts add up
 * to the pool's, which equals the hooks run; time was accounted. */
void test_counters(void) {
  enum { N = 16, ROUNDS = 100 };
  pool_test_t *t = pool_new(&pool_row_lf);
  pool_conns(t, N, &pool_count_ops);
  lf_create(t, TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE);
  CU_ASSERT_EQUAL(taxi_lf_spawn(t->p, 4), 0);
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < N; i++) util_write_byte(t->conn[i].sv[1]);
    CU_ASSERT(pool_wait_bytes(t, (long)N * (round + 1)));
  }
  CU_ASSERT(lf_wait_idle(t->p, 4));
  CU_ASSERT_EQUAL(
      util_bounded(lf_do_shutdown, t->p, POOLS_WAIT_MS, "taxi_lf_stop"), 0);
  taxi_lf_stats_t s = lf_stats(t->p);
  taxi_lf_thread_stats_t ts[8];
  memset(ts, 0, sizeof ts);
  int n = taxi_lf_thread_stats(t->p, ts, 8);
  CU_ASSERT_EQUAL(n, 4);
  uint64_t sum = 0, ns = 0;
  for (int i = 0; i < n && i < 8; i++) {
    sum += ts[i].events;
    ns += ts[i].leader_ns + ts[i].processing_ns + ts[i].follower_ns;
    CU_ASSERT_EQUAL(ts[i].id, (unsigned)i);
    CU_ASSERT_EQUAL(ts[i].spawned, 1);
    CU_ASSERT_EQUAL(ts[i].active, 0);
  }
  printf("(%llu events, %d hooks) ", (unsigned long long)s.events,
         pool_total_inputs(t));
  CU_ASSERT_EQUAL(sum, s.events);
  CU_ASSERT_EQUAL(s.events, (uint64_t)pool_total_inputs(t));
  CU_ASSERT(s.events >= N);
  CU_ASSERT(s.leader_ns + s.processing_ns + s.follower_ns > 0);
  CU_ASSERT(s.processing_ns > 0);
  CU_ASSERT(ns > 0);
  CU_ASSERT(s.waits > 0);
  CU_ASSERT_EQUAL(s.threads, 0);
  CU_ASSERT_EQUAL(s.leaders, 0);
  CU_ASSERT_EQUAL(s.followers, 0);
  /* Fewer slots than threads: the count is still the total. */
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 2), 4);
  CU_ASSERT_EQUAL(taxi_lf_thread_stats(t->p, ts, 0), 4);
  pool_free(t);
}
