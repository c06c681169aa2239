/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/conformance/suites.h - the backend conformance suites.
 *
 * Every suite runs against the backend named by taxi_test_backend: each test
 * creates its reactors with taxi_reactor_create(&r, taxi_test_backend) (or
 * conf_reactor(), which asserts that it worked).  One program,
 * test_reactor (main.c), runs them over the backend it is given.
 */
#ifndef TAXI_TESTS_CONFORMANCE_SUITES_H
#define TAXI_TESTS_CONFORMANCE_SUITES_H

#include <stdatomic.h>
#include <stddef.h>

#include "taxi/taxi.h"
#include "../runner.h"
#include "../util.h"

extern const char *taxi_test_backend;

extern const taxi_test_suite_t conf_suite_io;
extern const taxi_test_suite_t conf_suite_lifetime;
extern const taxi_test_suite_t conf_suite_timers;
extern const taxi_test_suite_t conf_suite_notify;
extern const taxi_test_suite_t conf_suite_mqueue;
extern const taxi_test_suite_t conf_suite_signals;
extern const taxi_test_suite_t conf_suite_fork;
extern const taxi_test_suite_t conf_suite_scale;
extern const taxi_test_suite_t conf_suite_alloc;
extern const taxi_test_suite_t conf_suite_bad_input;
extern const taxi_test_suite_t conf_suite_failures;

/* A reactor on taxi_test_backend; CU_FAIL_FATAL when creation fails. */
taxi_reactor_t *conf_reactor(void);
#if !defined(_WIN32)
/* raise(signo), except where the reactor's signals come from libkqueue's
 * EVFILT_SIGNAL: there the signal is sent to the process (kill), and the
 * first time it says why (see main.c). */
int conf_raise(int signo);
#endif

/* Recover the enclosing object from a pointer to its member. */

/*
 * A general-purpose handler that counts what happens to it.  Its input hook
 * drains the handle (when `drain` is set) and records what read(2) said;
 * every hook returns the matching *_ret field.
 */
typedef struct conf_probe {
  taxi_handler_t h;
  int fd;       /* the handle it serves, or -1 */
  int drain;    /* input: read until EAGAIN (default 1) */
  int close_fd; /* close: close(fd) (default 0) */
  int input_ret, output_ret, timeout_ret, signal_ret;
  atomic_int inputs, outputs, excepts, timeouts, signals, closes;
  atomic_uint in_events, out_events; /* OR of the bits reported */
  atomic_uint last_in_events, last_out_events;
  atomic_int last_signo;
  atomic_long bytes;     /* bytes read by the input hook */
  atomic_int eof;        /* the input hook read 0 */
  atomic_int read_errno; /* errno of a failed read (not EAGAIN) */
  void *last_act;
  taxi_timer_t *last_timer;
} conf_probe_t;

extern const taxi_handler_ops_t conf_probe_ops;
/* Zero *p, set fd, drain = 1, and taxi_handler_init() it with
 * conf_probe_ops (ops may be given to override, NULL for the default). */
void conf_probe_init(conf_probe_t *p, int fd, const taxi_handler_ops_t *ops);

/* The probe hooks, for tables that mix them with other hooks. */
int conf_probe_input(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int conf_probe_output(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int conf_probe_exception(taxi_handler_t *h, taxi_handle_t fd, unsigned ev);
int conf_probe_timeout(taxi_handler_t *h, taxi_timer_t *t, void *act);
int conf_probe_signal(taxi_handler_t *h, int signo);
void conf_probe_close(taxi_handler_t *h, taxi_handle_t fd);

/* Predicates for run_until over an atomic_int counter: *(atomic_int *)arg
 * is at least 1 / the target in a conf_count_goal_t. */
int conf_pred_nonzero(void *counter);
typedef struct conf_count_goal {
  atomic_int *counter;
  int goal;
} conf_count_goal_t;
int conf_pred_reached(void *goal);

/* Dispatch without blocking until nothing more is ready (at most `rounds`
 * calls), so that a test starts from a quiet reactor. */
void conf_settle(taxi_reactor_t *r, int rounds);

/* The backend description of taxi_test_backend (from taxi_backend_info). */
int conf_backend_info(taxi_backend_info_t *out);

#endif /* TAXI_TESTS_CONFORMANCE_SUITES_H */
