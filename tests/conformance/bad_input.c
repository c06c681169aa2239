/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/bad_input.c - every documented error path returns its
 * code, and a refused call changes nothing.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000

static void nop(void *arg) { (void)arg; }

static void close_pair(int sv[2]) {
  close(sv[0]);
  close(sv[1]);
}

/* Every function given a NULL reactor: TAXI_EINVAL (or its documented
 * NULL result). */
static void test_null_reactor(void) {
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  taxi_reactor_stats_t s;
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);

  CU_ASSERT_EQUAL(taxi_reactor_destroy(NULL), TAXI_EINVAL);
  CU_ASSERT_PTR_NULL(taxi_reactor_backend(NULL));
  unsigned caps = 7;
  CU_ASSERT_EQUAL(taxi_reactor_caps(NULL, &caps), TAXI_EINVAL);
  CU_ASSERT_EQUAL(caps, 7); /* untouched */
  CU_ASSERT_EQUAL(taxi_reactor_register(NULL, sv[0], &p.h, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_modify(NULL, &p.h, TAXI_EV_READ), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_remove(NULL, &p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(NULL, &p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_resume(NULL, &p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_handle_one(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_run(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_stop(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_restart(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_stopped(NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_notify(NULL, nop, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(NULL, &t, &p.h, 0, 0, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(NULL, &t), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(NULL, SIGUSR1, &p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_remove_signal(NULL, SIGUSR1), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_reinit_after_fork(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_stats(NULL, &s), TAXI_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  close_pair(sv);
}

/* NULL handler, timer, function and out pointers: TAXI_EINVAL. */
static void test_null_arguments(void) {
  taxi_reactor_t *r = conf_reactor();
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);

  CU_ASSERT_EQUAL(taxi_reactor_caps(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], NULL, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_modify(r, NULL, TAXI_EV_READ), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_notify(r, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, NULL, &p.h, 0, 0, NULL),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, NULL, 0, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, NULL), TAXI_EINVAL);

  CU_ASSERT_EQUAL(util_reactor_create(NULL, taxi_test_backend), TAXI_EINVAL);
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.backend = taxi_test_backend;
  CU_ASSERT_EQUAL(taxi_reactor_create(NULL, &o), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_handler_init(NULL, &conf_probe_ops), TAXI_EINVAL);
  taxi_handler_t h;
  CU_ASSERT_EQUAL(taxi_handler_init(&h, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_handler_ref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_handler_unref(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_timer_init(NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_backend_info(NULL, 0), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_backend_names(NULL, 1), TAXI_EINVAL);

  /* Nothing was attached: the reactor is empty and still works. */
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, 0);
  CU_ASSERT_EQUAL(taxi_reactor_handle_events(r, 0), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  close_pair(sv);
}

/* TAXI_INVALID_HANDLE and a closed descriptor: TAXI_EBADF, handler left
 * detached and reusable. */
static void test_bad_handles(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  CU_ASSERT_EQUAL(
      taxi_reactor_register(r, TAXI_INVALID_HANDLE, &p.h, TAXI_EV_READ),
      TAXI_EBADF);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  int dead = sv[0];
  close(dead);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, dead, &p.h, TAXI_EV_READ),
                  TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, -42, &p.h, TAXI_EV_READ),
                  TAXI_EBADF);
  /* The closed handle comes first, whatever else is wrong: an event the
   * backend may not watch, ... */
  CU_ASSERT_EQUAL(taxi_reactor_register(r, dead, &p.h, TAXI_EV_EXCEPT),
                  TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);

  int ok[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(ok), 0);
  p.fd = ok[0];
  CU_ASSERT_EQUAL(taxi_reactor_register(r, ok[0], &p.h, TAXI_EV_READ), 0);
  /* ... or a handler that has a handle already (a new closed number: ok
   * may have taken dead's). */
  int gone[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(gone), 0);
  close(gone[0]);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, gone[0], &p.h, TAXI_EV_READ),
                  TAXI_EBADF);
  close(gone[1]);
  CU_ASSERT_EQUAL(util_write_byte(ok[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close(sv[1]);
  close_pair(ok);
}

/* The same handle twice (another handler): TAXI_EEXIST; the same handler
 * for a second handle: TAXI_EEXIST.  The first registration is intact. */
static void test_duplicates(void) {
  taxi_reactor_t *r = conf_reactor();
  int a[2], b[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(a), 0);
  CU_ASSERT_EQUAL_FATAL(util_socketpair(b), 0);
  conf_probe_t p, q;
  conf_probe_init(&p, a[0], NULL);
  conf_probe_init(&q, a[0], NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, a[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, a[0], &q.h, TAXI_EV_READ),
                  TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, a[0], &p.h, TAXI_EV_READ),
                  TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, b[0], &p.h, TAXI_EV_READ),
                  TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &q.h), TAXI_ENOENT);

  CU_ASSERT_EQUAL(util_write_byte(a[1]), 1);
  CU_ASSERT_EQUAL(util_write_byte(b[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.inputs), 1);
  CU_ASSERT_EQUAL(atomic_load(&q.inputs), 0);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&q.closes), 0);
  close_pair(a);
  close_pair(b);
}

/* remove, modify, suspend, resume on a handler without a registered
 * handle: TAXI_ENOENT (never registered, removed, or timers only). */
static void test_not_registered(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p, tp;
  conf_probe_init(&p, -1, NULL);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_modify(r, &p.h, TAXI_EV_READ), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &p.h), TAXI_ENOENT);

  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  p.fd = sv[0];
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_modify(r, &p.h, TAXI_EV_WRITE), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);

  /* Attached through a timer only. */
  conf_probe_init(&tp, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &tp.h, 60 * TAXI_NSEC_PER_SEC, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_modify(r, &tp.h, TAXI_EV_READ), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_suspend(r, &tp.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_resume(r, &tp.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &tp.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&tp.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* Event masks: empty, unknown bits, report-only bits alone: TAXI_EINVAL,
 * for register and modify; a refused modify leaves the interest as it
 * was.  EXCEPT: accepted iff the backend has TAXI_CAP_EXCEPT. */
static void test_bad_event_masks(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  const unsigned bad[] = {0u,
                          0x100u,
                          TAXI_EV_HUP,
                          TAXI_EV_ERR,
                          TAXI_EV_HUP | TAXI_EV_ERR,
                          0x80000000u,
                          TAXI_EV_READ | 0x100u};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = taxi_reactor_register(r, sv[0], &p.h, bad[i]);
    if (rc != TAXI_EINVAL)
      printf("\n    register(events 0x%x) = %s\n", bad[i], taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
  }
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);

  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = taxi_reactor_modify(r, &p.h, bad[i]);
    if (rc != TAXI_EINVAL)
      printf("\n    modify(events 0x%x) = %s\n", bad[i], taxi_error_name(rc));
    CU_ASSERT_EQUAL(rc, TAXI_EINVAL);
  }
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.outputs), 0);

  int rc = taxi_reactor_modify(r, &p.h, TAXI_EV_READ | TAXI_EV_EXCEPT);
  unsigned caps = 0;
  CU_ASSERT_EQUAL(taxi_reactor_caps(r, &caps), 0);
  if (caps & TAXI_CAP_EXCEPT) {
    CU_ASSERT_EQUAL(rc, 0);
  } else {
    CU_ASSERT_EQUAL(rc, TAXI_ENOTSUP);
  }
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* A regular file: watched (poll, select) or refused with TAXI_ENOTSUP
 * (epoll), nothing else. */
static void test_regular_file(void) {
  taxi_reactor_t *r = conf_reactor();
#if defined(_WIN32)
  /* A file HANDLE, deleted when closed: select and WSAPoll watch sockets
   * only, so TAXI_ENOTSUP. */
  char dir[MAX_PATH], path[MAX_PATH];
  CU_ASSERT_FATAL(GetTempPathA(sizeof dir, dir) > 0);
  CU_ASSERT_FATAL(GetTempFileNameA(dir, "tx", 0, path) != 0);
  HANDLE fh = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, 0, NULL,
                          CREATE_ALWAYS, FILE_FLAG_DELETE_ON_CLOSE, NULL);
  CU_ASSERT_FATAL(fh != INVALID_HANDLE_VALUE);
  taxi_handle_t fd = (taxi_handle_t)fh;
#else
  char path[] = "/tmp/taxi-test-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  unlink(path);
#endif
  conf_probe_t p;
  conf_probe_init(&p, fd, NULL);
  p.drain = 0;
  int rc = taxi_reactor_register(r, fd, &p.h, TAXI_EV_READ);
  CU_ASSERT(rc == 0 || rc == TAXI_ENOTSUP);
  if (rc == TAXI_ENOTSUP)
    CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
#if defined(_WIN32)
  CloseHandle(fh);
#else
  close(fd);
#endif
}

/* Timers: negative delay or period, a handler without a timeout hook:
 * TAXI_EINVAL; cancelling a timer never scheduled: TAXI_ENOENT. */
static void test_bad_timers(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, -1, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 0, -1, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &p.h, INT64_MIN, INT64_MIN, NULL),
      TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT); /* not attached */

  static const taxi_handler_ops_t no_timeout_ops = {.input = conf_probe_input,
                                                    .close = conf_probe_close};
  conf_probe_t q;
  conf_probe_init(&q, -1, &no_timeout_ops);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &q.h, 0, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t), TAXI_ENOENT);

  CU_ASSERT(run_for(r, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&p.timeouts), 0);

  /* A valid schedule still works afterwards. */
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 0, 0, NULL), 0);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.timeouts, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&q.closes), 0);
}

/* A handler whose ops is NULL (zeroed, or cleared after init): register,
 * schedule and add_signal give TAXI_EINVAL. */
static void test_null_ops(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  taxi_handler_t h;
  CU_ASSERT_EQUAL(taxi_handler_init(&h, &conf_probe_ops), 0);
  h.ops = NULL;
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &h, TAXI_EV_READ),
                  TAXI_EINVAL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &h, 0, 0, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(r, SIGUSR1, &h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &h), TAXI_ENOENT);
  taxi_reactor_stats_t s;
  CU_ASSERT_EQUAL(taxi_reactor_stats(r, &s), 0);
  CU_ASSERT_EQUAL(s.handles, 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT(run_for(r, 20) >= 0); /* nothing to call: must not crash */
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  close_pair(sv);
}

/* taxi_reactor_create(opts) must fail with `expected`; a reactor
 * created anyway is destroyed (and reported). */
static void expect_create_fails(const char *backend, unsigned max_events,
                                int expected) {
  taxi_reactor_options_t o = TAXI_REACTOR_OPTIONS_INIT;
  o.backend = backend;
  o.max_events = max_events;
  taxi_reactor_t *r = NULL;
  int rc = taxi_reactor_create(&r, &o);
  if (rc == 0) {
    printf("\n    create(\"%s\", max_events %u) succeeded on %s\n", backend,
           max_events, taxi_reactor_backend(r));
    taxi_reactor_destroy(r);
  }
  CU_ASSERT_EQUAL(rc, expected);
}

/* Unknown backend names: TAXI_ENOBACKEND; max_events too large:
 * TAXI_EINVAL. */
static void test_unknown_backend(void) {
  taxi_reactor_t *r = NULL;
  int rc = util_reactor_create(&r, "no-such-backend");
  if (rc == 0) taxi_reactor_destroy(r);
  CU_ASSERT_EQUAL(rc, TAXI_ENOBACKEND);
  expect_create_fails("no-such-backend", 0, TAXI_ENOBACKEND);
  expect_create_fails("", 0, TAXI_ENOBACKEND);
  expect_create_fails("EPOLL ", 0, TAXI_ENOBACKEND);
  expect_create_fails(taxi_test_backend, 65537, TAXI_EINVAL);
}

/* A handler attached to reactor A used with reactor B: register, schedule
 * and add_signal give TAXI_EINVAL; remove/modify on B give TAXI_ENOENT.
 * A stays intact. */
static void test_handler_of_another_reactor(void) {
  taxi_reactor_t *a = conf_reactor();
  taxi_reactor_t *b = conf_reactor();
  int sa[2], sb[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sa), 0);
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sb), 0);
  conf_probe_t p, tp;
  conf_probe_init(&p, sa[0], NULL);
  CU_ASSERT_EQUAL_FATAL(taxi_reactor_register(a, sa[0], &p.h, TAXI_EV_READ), 0);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);

  CU_ASSERT_EQUAL(taxi_reactor_register(b, sb[0], &p.h, TAXI_EV_READ),
                  TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(b, &t, &p.h, 0, 0, NULL), TAXI_EINVAL);
#if defined(_WIN32)
  /* No signals to add there at all. */
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(b, SIGUSR1, &p.h), TAXI_ENOTSUP);
#else
  CU_ASSERT_EQUAL(taxi_reactor_add_signal(b, SIGUSR1, &p.h), TAXI_EINVAL);
#endif
  CU_ASSERT_EQUAL(taxi_reactor_remove(b, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_modify(b, &p.h, TAXI_EV_WRITE), TAXI_ENOENT);

  /* Attached to A through a timer only. */
  conf_probe_init(&tp, -1, NULL);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(a, &t, &tp.h, 60 * TAXI_NSEC_PER_SEC, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_register(b, sb[0], &tp.h, TAXI_EV_READ),
                  TAXI_EINVAL);
  /* A timer scheduled on A, given to a handler of B. */
  conf_probe_t bp;
  conf_probe_init(&bp, -1, NULL);
  taxi_timer_t bt;
  CU_ASSERT_EQUAL(taxi_timer_init(&bt), 0);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(b, &bt, &bp.h, 60 * TAXI_NSEC_PER_SEC, 0, NULL), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(b, &t, &bp.h, 0, 0, NULL), TAXI_EINVAL);

  CU_ASSERT_EQUAL(util_write_byte(sa[1]), 1);
  CU_ASSERT_EQUAL(run_until(a, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT(run_for(b, 20) >= 0);
  CU_ASSERT_EQUAL(atomic_load(&bp.timeouts), 0);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(b), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(atomic_load(&tp.closes), 0);
  CU_ASSERT_EQUAL(atomic_load(&bp.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(a), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&tp.closes), 1);
  close_pair(sa);
  close_pair(sb);
}

/* taxi_handler_unref without a reference: TAXI_EINVAL, and the handler is
 * not closed by it. */
static void test_unref_without_ref(void) {
  taxi_reactor_t *r = conf_reactor();
  conf_probe_t p;
  conf_probe_init(&p, -1, NULL);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), TAXI_EINVAL);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  p.fd = sv[0];
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(taxi_handler_ref(&p.h), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), TAXI_EINVAL);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(util_write_byte(sv[1]), 1);
  CU_ASSERT_EQUAL(run_until(r, conf_pred_nonzero, &p.inputs, WAIT_MS), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

/* A removed handler whose close is pending (a reference is held):
 * register and schedule give TAXI_EBUSY. */
static void test_close_pending_is_ebusy(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  conf_probe_t p;
  conf_probe_init(&p, sv[0], NULL);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_handler_ref(&p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &p.h), TAXI_ENOENT);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &p.h, TAXI_EV_READ),
                  TAXI_EBUSY);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(taxi_reactor_schedule(r, &t, &p.h, 0, 0, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&p.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  CU_ASSERT_EQUAL(taxi_reactor_destroy(r), 0);
  CU_ASSERT_EQUAL(atomic_load(&p.closes), 1);
  close_pair(sv);
}

static int destroy_reactor(void *r) { return taxi_reactor_destroy(r); }

/* taxi_handler_init on a handler the reactor still has - registered, with
 * a timer, or removed with its close hook to come - is refused with
 * TAXI_EBUSY and changes nothing (the reactor's destroy closes each once,
 * where wiping them would have made it wait for ever); on bytes that only
 * look like a handler (never initialised, or a copy of an attached one)
 * it works. */
static void test_init_attached_is_ebusy(void) {
  taxi_reactor_t *r = conf_reactor();
  int sv[2], sw[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sw), 0);
  static const taxi_handler_ops_t other_ops = {.input = conf_probe_input};
  conf_probe_t reg, timed, removed;
  conf_probe_init(&reg, sv[0], NULL);
  conf_probe_init(&timed, -1, NULL);
  conf_probe_init(&removed, sw[0], NULL);
  taxi_timer_t t;
  CU_ASSERT_EQUAL(taxi_timer_init(&t), 0);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &reg.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(
      taxi_reactor_schedule(r, &t, &timed.h, 3600 * TAXI_NSEC_PER_SEC, 0, NULL),
      0);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sw[0], &removed.h, TAXI_EV_READ), 0);
  CU_ASSERT_EQUAL(taxi_handler_ref(&removed.h), 0);
  CU_ASSERT_EQUAL(taxi_reactor_remove(r, &removed.h), 0);

  /* A copy of an attached handler names the reactor but is not in it. */
  conf_probe_t copy;
  memcpy(&copy, &reg, sizeof copy);
  CU_ASSERT_EQUAL(taxi_handler_init(&copy.h, &other_ops), 0);
  taxi_handler_t junk;
  memset(&junk, 0xa5, sizeof junk);
  CU_ASSERT_EQUAL(taxi_handler_init(&junk, &other_ops), 0);
  memset(&junk, 0xff, sizeof junk);
  CU_ASSERT_EQUAL(taxi_handler_init(&junk, &other_ops), 0);

  CU_ASSERT_EQUAL(taxi_handler_init(&reg.h, &other_ops), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_handler_init(&timed.h, &other_ops), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_handler_init(&removed.h, &other_ops), TAXI_EBUSY);
  /* Unchanged: the same hooks, still registered, still referenced. */
  CU_ASSERT_PTR_EQUAL(reg.h.ops, &conf_probe_ops);
  CU_ASSERT_EQUAL(taxi_reactor_register(r, sv[0], &reg.h, TAXI_EV_READ),
                  TAXI_EEXIST);
  CU_ASSERT_EQUAL(taxi_reactor_cancel(r, &t), 0);
  CU_ASSERT_EQUAL(atomic_load(&removed.closes), 0);
  CU_ASSERT_EQUAL(taxi_handler_unref(&removed.h), 0);
  CU_ASSERT_EQUAL(atomic_load(&removed.closes), 1);
  /* Closed: it may be initialised and attached again. */
  CU_ASSERT_EQUAL(taxi_handler_init(&removed.h, &conf_probe_ops), 0);

  /* Bounded: a destroy that never returns fails the test, naming it. */
  CU_ASSERT_EQUAL(
      util_bounded(destroy_reactor, r, WAIT_MS, "taxi_reactor_destroy"), 0);
  CU_ASSERT_EQUAL(atomic_load(&reg.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&timed.closes), 1);
  CU_ASSERT_EQUAL(atomic_load(&removed.closes), 1);
  close_pair(sv);
  close_pair(sw);
}

static CU_TestInfo bad_input_tests[] = {
    {"NULL reactor", test_null_reactor},
    {"NULL handler, timer, fn, out", test_null_arguments},
    {"invalid and closed handles: EBADF", test_bad_handles},
    {"duplicate handle or handler: EEXIST", test_duplicates},
    {"not registered: ENOENT", test_not_registered},
    {"bad event masks: EINVAL", test_bad_event_masks},
    {"regular file: 0 or ENOTSUP", test_regular_file},
    {"bad timers", test_bad_timers},
    {"handler with NULL ops: EINVAL", test_null_ops},
    {"unknown backend: ENOBACKEND", test_unknown_backend},
    {"handler of another reactor", test_handler_of_another_reactor},
    {"unref without ref: EINVAL", test_unref_without_ref},
    {"close pending: EBUSY", test_close_pending_is_ebusy},
    {"init of a handler still attached: EBUSY", test_init_attached_is_ebusy},
    CU_TEST_INFO_NULL,
};

const taxi_test_suite_t conf_suite_bad_input = {"bad input", bad_input_tests,
                                                60, NULL};
