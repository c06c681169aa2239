/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/pool_per_handle.c - one thread per handle at a time, for
 * each pool of the table: 8 pool threads, 4 writer threads hammering the
 * same 4 sockets, and no hook ever finds another running for its handle
 * (tests of the "lf" and "hsha" suites).
 */
#define _GNU_SOURCE 1

#include "pool_fixture.h"

/* Read in small chunks with yields in between, so that a second thread on
 * the same handle would very likely overlap. */
static int pool_serial_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev) {
  pool_conn_t *c = POOL_CONN(h);
  (void)ev;
  if (atomic_exchange(&c->busy, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
  char buf[16];
  for (int i = 0; i < 32; i++) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    atomic_fetch_add(&c->bytes, (long)n);
    if (i % 8 == 0) sched_yield();
  }
  for (int i = 0; i < 3; i++) sched_yield();
  atomic_fetch_add(&c->inputs, 1);
  atomic_store(&c->busy, 0);
  return 0;
}

static const taxi_handler_ops_t pool_serial_ops = {.input = pool_serial_input,
                                                   .close = pool_conn_close};

typedef struct pool_writer {
  pool_test_t *t;
  int seed;
  int writes;
  long written;
  int stuck;
} pool_writer_t;

/* Write `writes` chunks of 1..32 bytes to random ones of the 4 peers. */
static void pool_writer_main(void *arg) {
  pool_writer_t *w = arg;
  uint64_t st = (uint64_t)w->seed * 7919u + 1;
  char buf[32];
  memset(buf, 'w', sizeof buf);
  for (int i = 0; i < w->writes; i++) {
    uint64_t x = pools_rand(&st);
    int c = (int)(x % 4);
    size_t len = 1 + (size_t)((x >> 8) % sizeof buf);
    taxi_time_t start = taxi_now();
    for (;;) {
      ssize_t n = write(w->t->conn[c].sv[1], buf, len);
      if (n > 0) {
        w->written += n;
        break;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        w->stuck = 1;
        return;
      }
      if (util_elapsed_ms(start) > POOLS_WAIT_MS) {
        w->stuck = 1; /* nobody reads: the pool stopped dispatching */
        return;
      }
      sched_yield();
    }
  }
}

void pool_one_thread_per_handle(const pool_row_t *row, const void *opts) {
  enum { WRITERS = 4 };
  pool_test_t *t = pool_new(row);
  pool_conns(t, 4, &pool_serial_ops);
  pool_start(t, opts, 8);
  static pool_writer_t w[WRITERS];
  util_thread_t wt[WRITERS];
  int writes = pools_small() ? 3000 : 20000;
  for (int i = 0; i < WRITERS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].t = t;
    w[i].seed = i + 1;
    w[i].writes = writes;
    CU_ASSERT_EQUAL_FATAL(util_thread_start(&wt[i], pool_writer_main, &w[i]),
                          0);
  }
  long total = 0;
  int stuck = 0;
  for (int i = 0; i < WRITERS; i++) {
    util_thread_join(&wt[i], 60000, "a writer thread");
    total += w[i].written;
    stuck += w[i].stuck;
  }
  CU_ASSERT_EQUAL(stuck, 0);
  CU_ASSERT(pool_wait_bytes(t, total));
  CU_ASSERT_EQUAL(pool_total_bytes(t), total);
  int overlaps = 0;
  for (int c = 0; c < 4; c++) overlaps += atomic_load(&t->conn[c].overlaps);
  printf("(%d hooks, %ld bytes, %d overlaps) ", pool_total_inputs(t), total,
         overlaps);
  CU_ASSERT_EQUAL(overlaps, 0);
  pool_free(t);
}
