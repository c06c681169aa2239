/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/scale.c - many handles on backends without a handle
 * limit; a clean TAXI_ETOOMANY beyond the limit on those with one (select's
 * FD_SETSIZE).  The branch is chosen from taxi_backend_info().max_handles,
 * never from the backend's name.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#define WAIT_MS 10000

enum { PAIRS = 5000, HANDLES = 2 * PAIRS, HOT = 100 };

/* 1 when this backend can hold HANDLES handles (max_handles 0: no limit). */
static int backend_is_unlimited(taxi_backend_info_t *info) {
  CU_ASSERT_EQUAL_FATAL(conf_backend_info(info), 0);
  return info->max_handles == 0 || info->max_handles >= (size_t)HANDLES + 64;
}

/* 10,000 registered sockets (5,000 socketpairs, both ends); one byte into
 * 100 random pairs: exactly those 100 are dispatched, once each. */
static void test_ten_thousand_handles(void) {
  taxi_backend_info_t info;
  if (!backend_is_unlimited(&info)) {
    printf("(not applicable: max_handles %zu) ", info.max_handles);
    return;
  }
  unsigned long need = HANDLES + 200;
  if (!util_raise_nofile(need)) {
    printf("\n    cannot raise RLIMIT_NOFILE to %lu: %s\n", need,
           strerror(errno));
    CU_FAIL_FATAL("RLIMIT_NOFILE cannot be raised to hold 10,000 sockets");
  }
  taxi_reactor_t *r = conf_reactor();
  int(*sv)[2] = calloc(PAIRS, sizeof *sv);
  conf_probe_t *p = calloc(HANDLES, sizeof *p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  int made = 0, reg_failures = 0, first_rc = 0;
  for (int i = 0; i < PAIRS; i++) {
    if (util_socketpair(sv[i]) != 0) {
      printf("\n    socketpair #%d: %s\n", i, strerror(errno));
      break;
    }
    made++;
    for (int e = 0; e < 2; e++) {
      conf_probe_t *q = &p[2 * i + e];
      conf_probe_init(q, sv[i][e], NULL);
      int rc = taxi_reactor_register(r, sv[i][e], &q->h, TAXI_EV_READ);
      if (rc != 0) {
        if (!reg_failures) first_rc = rc;
        reg_failures++;
      }
    }
  }
  CU_ASSERT_EQUAL_FATAL(made, PAIRS);
  if (reg_failures)
    printf("\n    %d registrations failed, first with %s\n", reg_failures,
           taxi_error_name(first_rc));
  CU_ASSERT_EQUAL_FATAL(reg_failures, 0);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, (size_t)HANDLES);
  conf_settle(r, 10);

  /* 100 distinct pairs, chosen with a fixed seed. */
  char *hot = calloc(PAIRS, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hot);
  unsigned seed = 2024u;
  for (int n = 0; n < HOT;) {
    seed = seed * 1103515245u + 12345u;
    int i = (int)((seed >> 8) % PAIRS);
    if (hot[i]) continue;
    hot[i] = 1;
    n++;
    CU_ASSERT_EQUAL(util_write_byte(sv[i][1]), 1);
  }

  taxi_time_t start = taxi_now();
  int total = 0;
  while (total < HOT && util_elapsed_ms(start) < WAIT_MS) {
    int rc = taxi_reactor_handle_events(r, 100);
    CU_ASSERT(rc >= 0);
    if (rc < 0) break;
    total += rc;
  }
  CU_ASSERT(run_for(r, 30) >= 0);
  int wrong = 0, missing = 0, twice = 0;
  for (int i = 0; i < PAIRS; i++) {
    int in0 = atomic_load(&p[2 * i].inputs);
    int in1 = atomic_load(&p[2 * i + 1].inputs);
    if (in1) wrong++;
    if (hot[i]) {
      if (in0 == 0) missing++;
      if (in0 > 1) twice++;
    } else if (in0) {
      wrong++;
    }
  }
  if (wrong || missing || twice)
    printf(
        "\n    dispatched: %d missing, %d more than once, %d not written to\n",
        missing, twice, wrong);
  CU_ASSERT_EQUAL(missing, 0);
  CU_ASSERT_EQUAL(twice, 0);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(total, HOT);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  int closes = 0;
  for (int i = 0; i < HANDLES; i++) closes += atomic_load(&p[i].closes);
  CU_ASSERT_EQUAL(closes, HANDLES);
  for (int i = 0; i < PAIRS; i++) {
    close(sv[i][0]);
    close(sv[i][1]);
  }
  free(hot);
  free(p);
  free(sv);
}

#if defined(_WIN32)
/* Windows: the limit counts handles (Winsock's fd_set is a list, not a
 * bitmap indexed by number), so fill the set with listening sockets until
 * registration is refused with TAXI_ETOOMANY - at the latest at
 * max_handles, since the reactor's own wake-up socket takes a place -
 * then free one place and check that dispatching still works. */
static void test_beyond_handle_limit(void) {
  taxi_backend_info_t info;
  if (backend_is_unlimited(&info)) {
    printf("(not applicable: no handle limit) ");
    return;
  }
  size_t max = info.max_handles;
  taxi_reactor_t *r = conf_reactor();
  int *fds = calloc(max + 1, sizeof *fds);
  conf_probe_t *p = calloc(max + 1, sizeof *p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fds);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t n = 0;
  int rc = 0;
  for (; n <= max; n++) {
    fds[n] = util_tcp_listener(NULL);
    CU_ASSERT_FATAL(fds[n] >= 0);
    conf_probe_init(&p[n], fds[n], NULL);
    rc = taxi_reactor_register(r, fds[n], &p[n].h, TAXI_EV_READ);
    if (rc != 0) break;
  }
  CU_ASSERT_EQUAL(rc, TAXI_ETOOMANY);
  CU_ASSERT(n >= max - 8 && n < max); /* a few places are taxi's own */
  /* The refused handler was not attached. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p[n].h), TAXI_ENOENT);
  close(fds[n]);

  /* One place freed: a pair fits, and its byte is dispatched. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p[0].h), 0);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t lp;
  conf_probe_init(&lp, sv[0], NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &lp.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &lp.inputs, WAIT_MS), 1);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  for (size_t i = 0; i < n; i++) close(fds[i]);
  close(sv[0]);
  close(sv[1]);
  free(fds);
  free(p);
}
#else
/* A backend with a handle limit: a descriptor beyond it is refused with
 * TAXI_ETOOMANY (no crash, no corruption); descriptors below still work. */
static void test_beyond_handle_limit(void) {
  taxi_backend_info_t info;
  if (backend_is_unlimited(&info)) {
    printf("(not applicable: no handle limit) ");
    return;
  }
  int high = (int)info.max_handles + 5;
  if (!util_raise_nofile((unsigned long)high + 64)) {
    printf("\n    cannot raise RLIMIT_NOFILE to %d: %s\n", high + 64,
           strerror(errno));
    CU_FAIL_FATAL("RLIMIT_NOFILE cannot be raised above the backend's limit");
  }
  taxi_reactor_t *r = conf_reactor();
  int sv[2], hv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL_FATAL(util_socketpair(hv), 0);
  CU_ASSERT_EQUAL_FATAL(dup2(hv[0], high), high);

  conf_probe_t hp, lp;
  conf_probe_init(&hp, high, NULL);
  conf_probe_init(&lp, sv[0], NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, high, &hp.h, TAXI_EV_READ),
                  TAXI_ETOOMANY);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, high, &hp.h, TAXI_EV_WRITE),
                  TAXI_ETOOMANY);
  /* The refused handler was not attached. */
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &hp.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&hp.closes), 0);

  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &lp.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(util_write_byte(hv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &lp.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&hp.inputs), 0);

  /* The refused handler can still be used for a handle within the limit. */
  int sv2[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv2), 0);
  hp.fd = sv2[0];
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv2[0], &hp.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv2[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &hp.inputs, WAIT_MS), 1);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(high);
  close(sv[0]);
  close(sv[1]);
  close(hv[0]);
  close(hv[1]);
  close(sv2[0]);
  close(sv2[1]);
}
#endif

/* A descriptor numbered above FD_SETSIZE works on a backend without a
 * limit. */
static void test_high_descriptor_unlimited(void) {
  taxi_backend_info_t info;
  if (!backend_is_unlimited(&info)) {
    printf("(not applicable: max_handles %zu) ", info.max_handles);
    return;
  }
#if defined(_WIN32)
  printf("(not applicable: Windows handles are not small numbers) ");
  return;
#endif
  int high = FD_SETSIZE + 5;
  if (!util_raise_nofile((unsigned long)high + 64))
    CU_FAIL_FATAL("RLIMIT_NOFILE cannot be raised above FD_SETSIZE");
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL_FATAL(dup2(sv[0], high), high);
  conf_probe_t p;
  conf_probe_init(&p, high, NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, high, &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close(high);
  close(sv[0]);
  close(sv[1]);
}

static CU_TestInfo scale_tests[] = {
    {"10,000 handles, 100 ready", test_ten_thousand_handles},
    {"beyond the handle limit: ETOOMANY", test_beyond_handle_limit},
    {"descriptor above FD_SETSIZE", test_high_descriptor_unlimited},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_scale = {"scale", scale_tests, 90, NULL};
