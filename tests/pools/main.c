/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/pools/main.c - the thread pools' test program, and the fixtures
 * the suites share.
 *
 *   test_pools [BACKEND|all [FILTER]]
 *
 * runs every pool suite over one readiness backend (by default
 * TAXI_BACKEND, else the best that works here) or over each that works
 * here ("all"); see taxi_test_family_main.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include "../fault/fault.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *pools_backend;

taxi_reactor_t *pools_reactor(void) {
  taxi_reactor_t *r = NULL;
  int rc = util_reactor_create(&r, pools_backend);
  if (rc != 0 || !r) {
    printf("\n    taxi_reactor_create(\"%s\") = %d (%s)\n", pools_backend, rc,
           taxi_error_name(rc));
  }
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_STRING_EQUAL(taxi_reactor_backend(r), pools_backend);
  return r;
}

int pools_backend_info(taxi_backend_info_t *out) {
  size_t n = taxi_backend_count();
  for (size_t i = 0; i < n; i++) {
    if (taxi_backend_info(out, i) == 0 && out->name &&
        strcmp(out->name, pools_backend) == 0)
      return 0;
  }
  memset(out, 0, sizeof *out);
  return TAXI_ENOENT;
}

int pools_can_many_leaders(const taxi_reactor_t *r) {
  unsigned need = TAXI_CAP_MULTI_WAIT | TAXI_CAP_ONESHOT;
  unsigned caps = 0;
  return taxi_reactor_caps(r, &caps) == 0 && (caps & need) == need;
}

int pools_small(void) {
  const char *s = getenv("TAXI_TEST_SMALL");
  return s && *s && strcmp(s, "0") != 0;
}

/* ---- gates --------------------------------------------------------------- */

void pools_gate_init(pools_gate_t *g) {
  atomic_init(&g->entered, 0);
  atomic_init(&g->open, 0);
  atomic_init(&g->left, 0);
  atomic_init(&g->timeouts, 0);
}

void pools_gate_pass(pools_gate_t *g) {
  atomic_fetch_add(&g->entered, 1);
  if (!util_wait_flag(&g->open, 1, POOLS_WAIT_MS))
    atomic_fetch_add(&g->timeouts, 1);
  atomic_fetch_add(&g->left, 1);
}

void pools_gate_open(pools_gate_t *g) { atomic_store(&g->open, 1); }

/* ---- descriptors --------------------------------------------------------- */

void pools_pair(int sv[2]) {
  if (util_socketpair(sv) != 0) {
    printf("\n    socketpair: %s\n", strerror(errno));
    CU_FAIL_FATAL("socketpair failed");
  }
}

void pools_close_pair(int sv[2]) {
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  sv[0] = sv[1] = -1;
}

long pools_drain(int fd) {
  long n = util_drain(fd);
  return n < 0 ? 0 : n;
}

/* ---- bounded waits ------------------------------------------------------- */

int pools_lf_wait(taxi_lf_pool_t *p,
                  int (*pred)(const taxi_lf_stats_t *s, void *arg), void *arg,
                  int max_ms, taxi_lf_stats_t *out) {
  taxi_lf_stats_t s;
  taxi_time_t start = taxi_now();
  for (;;) {
    memset(&s, 0, sizeof s);
    int rc = taxi_lf_stats(p, &s);
    if (out) *out = s;
    if (rc == 0 && pred(&s, arg)) return 1;
    if (util_elapsed_ms(start) > max_ms) return 0;
    util_sleep_ms(1);
  }
}

int pools_hsha_wait(taxi_hsha_pool_t *p,
                    int (*pred)(const taxi_hsha_stats_t *s, void *arg),
                    void *arg, int max_ms, taxi_hsha_stats_t *out) {
  taxi_hsha_stats_t s;
  taxi_time_t start = taxi_now();
  for (;;) {
    memset(&s, 0, sizeof s);
    int rc = taxi_hsha_stats(p, &s);
    if (out) *out = s;
    if (rc == 0 && pred(&s, arg)) return 1;
    if (util_elapsed_ms(start) > max_ms) return 0;
    util_sleep_ms(1);
  }
}

int pools_wait_count(atomic_int *counter, int goal, int max_ms) {
  return util_wait_flag(counter, goal, max_ms);
}

int pools_wait_sum(atomic_int *const *counters, size_t n, long goal,
                   int max_ms) {
  taxi_time_t start = taxi_now();
  for (;;) {
    long sum = 0;
    for (size_t i = 0; i < n; i++) sum += atomic_load(counters[i]);
    if (sum >= goal) return 1;
    if (util_elapsed_ms(start) > max_ms) return 0;
    util_sleep_ms(1);
  }
}

uint64_t pools_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- main ---------------------------------------------------------------- */

int pools_ping_all(const int *peers, int n) {
  struct pollfd pf[POOLS_PING_MAX];
  if (n > POOLS_PING_MAX) return -1;
  int left = n;
  for (int i = 0; i < n; i++) {
    if (util_write_byte(peers[i]) != 1) return -1;
    pf[i].fd = peers[i];
    pf[i].events = POLLIN;
    pf[i].revents = 0;
  }
  taxi_time_t start = taxi_now();
  while (left > 0) {
    if (util_elapsed_ms(start) > POOLS_WAIT_MS) return -1;
    int rc = poll(pf, (nfds_t)n, 100);
    if (rc < 0 && errno != EINTR) return -1;
    for (int i = 0; i < n && rc > 0; i++) {
      if (pf[i].fd < 0 || !pf[i].revents) continue;
      long got = util_read_byte(pf[i].fd);
      if (got == 1) {
        pf[i].fd = -1;
        left--;
      } else if (got == 0) {
        return -1;
      }
    }
  }
  return 0;
}

static const taxi_test_suite_t *const pools_base_suites[] = {
    &pools_suite_lf,
    &pools_suite_lf_shutdown,
    &pools_suite_lf_bad_input,
    &pools_suite_lf_alloc,
    &pools_suite_bound,
    &pools_suite_bound_bad_input,
    &pools_suite_bound_table,
    &pools_suite_hsha,
    &pools_suite_hsha_bad_input,
    &pools_suite_hsha_alloc,
    &pools_suite_stress_lf,
    &pools_suite_stress_lf_many,
    &pools_suite_stress_hsha,
    &pools_suite_failures,
    &pools_suite_signal_stop,
    &pools_suite_signal_late,
    &pools_suite_serial,
    &pools_suite_hook_state,
    &pools_suite_stop_result,
    &pools_suite_mqueue,
    &pools_suite_closed,
};
#define POOLS_N_SUITES (sizeof pools_base_suites / sizeof pools_base_suites[0])

static int run_backend(const char *backend, int argc, char **argv) {
  int skip = taxi_test_backend_unavailable("pools", backend);
  if (skip) return skip;
  pools_backend = backend;

  static taxi_test_suite_t suites[POOLS_N_SUITES];
  static char suite_names[POOLS_N_SUITES][96];
  const taxi_test_suite_t *list[POOLS_N_SUITES + 1];
  size_t n_list = 0;
  for (size_t i = 0; i < POOLS_N_SUITES; i++) {
    suites[i] = *pools_base_suites[i];
    snprintf(suite_names[i], sizeof suite_names[i], "pools[%s]: %s", backend,
             pools_base_suites[i]->name);
    suites[i].name = suite_names[i];
    list[n_list++] = &suites[i];
  }
  /* Named by itself. */
  list[n_list++] = pools_sets_suite(backend);
  char title[128];
  snprintf(title, sizeof title, "taxi thread pools: backend %s%s", backend,
           pools_small() ? " (TAXI_TEST_SMALL: reduced stress sizes)" : "");
  return taxi_test_run(title, list, n_list, argc, argv);
}

int main(int argc, char **argv) {
  /* Before the arguments are read: it runs the program again, as given. */
  fault_reexec_preloaded(argc, argv);
  return taxi_test_family_main(
      "pools", "TAXI_BACKEND", taxi_test_known_readiness,
      taxi_test_readiness_backends, run_backend, argc, argv);
}
