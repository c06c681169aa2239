/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/suites.h - the thread-pool suites: the Leader/Followers pool
 * (taxi/lf.h), the half-sync/half-async pool (taxi/hsha.h), and the
 * exactly-once stress test over both.
 *
 * Every suite runs against the backend named by pools_backend.  One
 * program, test_pools (main.c), runs them over the backend it is given; it
 * exits 77 (skip) when the backend does not work here.
 *
 * What main.c shares with every suite starts with pools_; the files of one
 * theme share their fixtures through a header of their own
 * (pool_fixture.h, the fixture and table of both pools; sets_helpers.h).
 *
 * Waits.  Tests never assert on time; every wait for another thread is
 * bounded (POOLS_WAIT_MS), and a thread that does not finish within its
 * bound ends the suite's process with a message naming what hung (see
 * util_thread_join), so a bug fails instead of hanging.
 */
#ifndef TAXI_TESTS_POOLS_SUITES_H
#define TAXI_TESTS_POOLS_SUITES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "taxi/taxi.h"
#include "../runner.h"
#include "../util.h"

/* The bound for one hand-over between threads. */
#define POOLS_WAIT_MS 10000

extern const char *pools_backend;

extern const taxi_test_suite_t pools_suite_lf;
extern const taxi_test_suite_t pools_suite_lf_shutdown;
extern const taxi_test_suite_t pools_suite_lf_bad_input;
extern const taxi_test_suite_t pools_suite_lf_alloc;
extern const taxi_test_suite_t pools_suite_bound;
extern const taxi_test_suite_t pools_suite_bound_bad_input;
extern const taxi_test_suite_t pools_suite_bound_table;
extern const taxi_test_suite_t pools_suite_hsha;
extern const taxi_test_suite_t pools_suite_hsha_bad_input;
extern const taxi_test_suite_t pools_suite_hsha_alloc;
extern const taxi_test_suite_t pools_suite_stress_lf;
extern const taxi_test_suite_t pools_suite_stress_lf_many;
extern const taxi_test_suite_t pools_suite_stress_hsha;
extern const taxi_test_suite_t pools_suite_failures;
extern const taxi_test_suite_t pools_suite_signal_stop;
extern const taxi_test_suite_t pools_suite_signal_late;
extern const taxi_test_suite_t pools_suite_serial;
extern const taxi_test_suite_t pools_suite_hook_state;
extern const taxi_test_suite_t pools_suite_stop_result;
extern const taxi_test_suite_t pools_suite_mqueue;
extern const taxi_test_suite_t pools_suite_closed;

/* Leader/Followers per handle set (sets.c, self-contained): the suite for
 * one backend, already named "pools[<backend>]: sets". */
const taxi_test_suite_t *pools_sets_suite(const char *backend);

/* ---- fixtures (main.c) ----------------------------------------------------
 */

/* One byte to each of the n (at most POOLS_PING_MAX) peers, then wait (at
 * most POOLS_WAIT_MS) until each answered one byte.  0, or -1 on error,
 * end of stream or time-out. */
#define POOLS_PING_MAX 128
int pools_ping_all(const int *peers, int n);

/* A reactor on pools_backend; CU_FAIL_FATAL when creation fails.  Call it
 * before starting threads that use the test's memory. */
taxi_reactor_t *pools_reactor(void);

/* The description of pools_backend (taxi_backend_info); 0 or TAXI_ENOENT. */
int pools_backend_info(taxi_backend_info_t *out);

/* 1 when r's backend can have several leaders (TAXI_LEADERS_MANY needs
 * TAXI_CAP_MULTI_WAIT and TAXI_CAP_ONESHOT): decided by caps, not name. */
int pools_can_many_leaders(const taxi_reactor_t *r);

/* 1 when TAXI_TEST_SMALL is set (and not "0"): the reduced sizes. */
int pools_small(void);

/*
 * A gate that hooks block on: pools_gate_pass() counts the entry, waits
 * (bounded by POOLS_WAIT_MS; counts a timeout) until the gate is opened,
 * counts the exit.
 */
typedef struct pools_gate {
  atomic_int entered;
  atomic_int open;
  atomic_int left;
  atomic_int timeouts;
} pools_gate_t;

void pools_gate_init(pools_gate_t *g);
void pools_gate_pass(pools_gate_t *g);
void pools_gate_open(pools_gate_t *g);

/* A socketpair for a test handler: sv[0] is registered, sv[1] the peer.
 * CU_FAIL_FATAL when it cannot be made. */
void pools_pair(int sv[2]);
void pools_close_pair(int sv[2]);

/* Read and discard what is ready on fd; returns the bytes read. */
long pools_drain(int fd);

/* Poll taxi_lf_stats until pred(stats, arg) holds or max_ms passed; the
 * last stats read are left in *out.  Returns 1 when pred held. */
int pools_lf_wait(taxi_lf_pool_t *p,
                  int (*pred)(const taxi_lf_stats_t *s, void *arg), void *arg,
                  int max_ms, taxi_lf_stats_t *out);
/* The same for taxi_hsha_stats. */
int pools_hsha_wait(taxi_hsha_pool_t *p,
                    int (*pred)(const taxi_hsha_stats_t *s, void *arg),
                    void *arg, int max_ms, taxi_hsha_stats_t *out);

/* Wait (bounded) until *counter >= goal; 1 when reached. */
int pools_wait_count(atomic_int *counter, int goal, int max_ms);
/* Wait (bounded) until the sum of n counters >= goal; 1 when reached. */
int pools_wait_sum(atomic_int *const *counters, size_t n, long goal,
                   int max_ms);

/* A deterministic pseudo-random generator (splitmix64). */
uint64_t pools_rand(uint64_t *state);

#endif /* TAXI_TESTS_POOLS_SUITES_H */
