/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/threads_pool.c - the Leader/Followers pool over the
 * completion queue, suite "pool": TAXI_LEADERS_MANY refused where the
 * backend has no multi-wait; completions reaped by one wait taken by the
 * next threads without another system call; the pool excluding
 * handle_events; posts, cancellation and close from other threads; and
 * the exactly-once echo of threads_echo.c.
 */
#define _GNU_SOURCE 1

#include "threads_helpers.h"

/* ---- the pool: the rest ---------------------------------------------------
 */

/* TAXI_LEADERS_MANY needs a completion queue several threads may wait on
 * at once (IOCP); every other backend refuses it with TAXI_ENOTSUP. */
static void test_pool_leaders_many(void) {
  if (pt_skip_one_thread()) return;
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
  if (pt_skip_one_thread()) return;
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
  if (pt_skip_one_thread()) return;
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
  if (pt_skip_one_thread()) return;
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
  if (pt_skip_one_thread()) return;
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
