/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/hsha_helpers.h - what the half-sync/half-async pool's
 * test files share: the test fixture (a pool over connections), its
 * hooks, the waits on the pool's counters.
 */
#ifndef TAXI_TESTS_POOLS_HSHA_HELPERS_H
#define TAXI_TESTS_POOLS_HSHA_HELPERS_H

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HS_MAX_CONNS 80

typedef struct hs_test hs_test_t;

typedef struct hs_conn {
  taxi_handler_t h;
  int sv[2];
  hs_test_t *t;
  int index;
  int prio; /* what the priority callback returns for it */
  atomic_int inputs;
  atomic_long bytes;
  atomic_int closes;
  atomic_int busy;
  atomic_int overlaps;
  atomic_int hook_done;
  atomic_int rejected; /* calls of the busy hook */
} hs_conn_t;

struct hs_test {
  taxi_reactor_t *r;
  taxi_hsha_pool_t *p;
  pools_gate_t gate;
  hs_conn_t conn[HS_MAX_CONNS];
  int nconns;
  pthread_t main_tid;
  /* Threads seen in hooks and in the priority callback. */
  pthread_mutex_t mu;
  pthread_t workers[16];
  int nworkers_seen;
  pthread_t reactor_tid;
  int have_reactor_tid;
  atomic_int reactor_tids_differ; /* the callback ran in two threads */
  atomic_int on_main;             /* hooks run by the main thread */
  atomic_int on_reactor;          /* hooks run by the reactor thread */
  atomic_int prio_calls;
  /* Order in which the hooks ran (conn index). */
  atomic_int next;
  atomic_int order[HS_MAX_CONNS];
  /* From inside hooks. */
  atomic_int hook_calls;
  atomic_int rc_shutdown, rc_shutdown2, rc_destroy, rc_stats;
  atomic_int workers_after_shutdown;
};

#define HS_CONN(hp) TAXI_CONTAINER_OF(hp, hs_conn_t, h)

/* Defined in one of the files, used in others. */
hs_test_t *hs_new(void);
void hs_conns(hs_test_t *t, int n, const taxi_handler_ops_t *ops);
int hs_do_shutdown(void *p);
int hs_do_destroy(void *p);
void hs_teardown(hs_test_t *t);
void hs_free(hs_test_t *t);
void hs_create(hs_test_t *t, const taxi_hsha_options_t *o);
taxi_hsha_stats_t hs_stats(taxi_hsha_pool_t *p);
int hs_wait_workers(taxi_hsha_pool_t *p, unsigned n);
int hs_wait_queued(taxi_hsha_pool_t *p, unsigned n);
long hs_total_bytes(hs_test_t *t);
int hs_total_inputs(hs_test_t *t);
int hs_wait_bytes(hs_test_t *t, long goal);
void hs_note_thread(hs_test_t *t);
void hs_conn_close(taxi_handler_t *h, taxi_handle_t fd);
extern const taxi_handler_ops_t hs_count_ops;
int hs_block_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int hs_mixed_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int hs_priority(taxi_handler_t *h, unsigned events, void *arg);
void test_shutdown_busy(void);
void test_shutdown_with_queued(void);
void test_shutdown_idle(void);
void test_shutdown_from_hook(void);
void test_destroy_running(void);
void test_remove_while_running(void);

#endif /* TAXI_TESTS_POOLS_HSHA_HELPERS_H */
