/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/suites.h - the proactor conformance suites (taxi/proactor.h).
 *
 * Every suite runs against the completion backend named by pt_backend.  One
 * program, test_proactor (main.c), runs them over the backend it is given
 * ("emulated", "emulated:poll", "emulated:select", "uring", "aio"); it
 * exits 77 (skip) and prints why when the backend is not compiled in or
 * this system refuses it (io_uring under a seccomp policy).
 *
 * The tests use the public API only.  They assert behaviour, never time:
 * every wait is bounded only to turn a lost completion into a failure.
 * TAXI_TEST_SMALL=1 (the TSan run in CI) shrinks the big transfers and the
 * thread stress.
 */
#ifndef TAXI_TESTS_PROACTOR_SUITES_H
#define TAXI_TESTS_PROACTOR_SUITES_H

#include "helpers.h"

extern const taxi_test_suite_t pt_suite_stream;      /* stream.c */
extern const taxi_test_suite_t pt_suite_files;       /* files.c */
extern const taxi_test_suite_t pt_suite_cancel;      /* cancel.c */
extern const taxi_test_suite_t pt_suite_timers;      /* timers.c */
extern const taxi_test_suite_t pt_suite_scale;       /* scale.c */
extern const taxi_test_suite_t pt_suite_dispatch;    /* threads.c */
extern const taxi_test_suite_t pt_suite_pool;        /* threads.c */
extern const taxi_test_suite_t pt_suite_alloc;       /* alloc.c */
extern const taxi_test_suite_t pt_suite_bad_input;   /* bad_input.c */
extern const taxi_test_suite_t pt_suite_fd_reuse;    /* fd_reuse.c */
extern const taxi_test_suite_t pt_suite_emfile;      /* emfile.c */
extern const taxi_test_suite_t pt_suite_signals;     /* signals.c */
extern const taxi_test_suite_t pt_suite_counters;    /* counters.c */
extern const taxi_test_suite_t pt_suite_one_thread;  /* one_thread.c */
extern const taxi_test_suite_t pt_suite_pooled;      /* pooled.c */
extern const taxi_test_suite_t pt_suite_group;       /* group.c */
extern const taxi_test_suite_t pt_suite_group_api;   /* group_api.c */
extern const taxi_test_suite_t pt_suite_regfiles;    /* regfiles.c */
extern const taxi_test_suite_t pt_suite_stop_result; /* stop_result.c */
extern const taxi_test_suite_t pt_suite_dgram;       /* dgram.c */

/* refusal.c: io_uring refused (seccomp ENOSYS/EPERM) -> clear error, the
 * automatic choice falls back.  Part of the bad input suite. */
void pt_test_uring_refused(void);

/* group.c: a group of `count` proactors on pt_backend (asserted made),
 * and a run of it in a bounded thread until it stops (what run returned). */
taxi_proactor_group_t *gr_group(unsigned count, taxi_group_spread_t s);
int gr_run(taxi_proactor_group_t *g);

#endif /* TAXI_TESTS_PROACTOR_SUITES_H */
