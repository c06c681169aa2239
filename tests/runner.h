/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/runner.h - a small harness over CUnit that isolates suites.
 *
 * CUnit runs every test in one process and has no time limit, so a crash or
 * a hang in one test would take the whole run with it.  On POSIX
 * taxi_test_run() forks one child per suite, in its own process group; the
 * child runs the suite with CUnit's basic interface (verbose) and reports its
 * counts to the parent through a pipe.  The parent enforces the suite's time
 * limit (then kills the child's whole process group), names the test that was
 * running when a child timed out or died of a signal, and prints a summary
 * ending with the line "N passed, N failed".
 *
 * Windows has no fork(): there each suite runs in the test program itself,
 * and a watchdog thread enforces the time limit by ending the program
 * (after printing which test hung and a failing total), since a hung suite
 * cannot be stopped alone.
 *
 * Environment:
 *   TAXI_TEST_SKIP=1            skip everything (exit status 77)
 *   TAXI_TEST_TIMEOUT_SCALE=k   multiply every suite's time limit by k
 *                               (for sanitizer or valgrind runs)
 * Arguments: an optional substring; only suites whose name contains it run
 * ("--list" lists the suites).  A family's program takes a backend first
 * (taxi_test_family_main below).
 *
 * Exit status of taxi_test_run(): 0 when every test passed, 1 when any
 * failed (or a suite timed out or crashed), 77 when told to skip or when no
 * suite matched the filter.
 */
#ifndef TAXI_TESTS_RUNNER_H
#define TAXI_TESTS_RUNNER_H

#include <stddef.h>

#include <CUnit/Basic.h>

typedef struct {
  const char *name;   /* the suite's name, as printed and filtered on */
  CU_TestInfo *tests; /* terminated by CU_TEST_INFO_NULL */
  unsigned timeout_s; /* time limit for the whole suite; 0 means 60 */
  /* Non-NULL: the suite cannot run on this platform, for this reason; it
   * is listed as skipped with the reason, and counts neither as passed
   * nor as failed. */
  const char *skip;
} taxi_test_suite_t;

#define TAXI_TEST_DEFAULT_TIMEOUT_S 60u

/* In the test table of a suite that is skipped on Windows (its `skip`
 * says why): the test function on POSIX, NULL on Windows, where the
 * function is not compiled. */
#if defined(_WIN32)
#define TAXI_TEST_POSIX_ONLY(fn) NULL
#else
#define TAXI_TEST_POSIX_ONLY(fn) fn
#endif
#define TAXI_TEST_SKIP_STATUS 77

/* 0 if the readiness backend `backend` works here; otherwise prints
 * "<prefix>[<backend>]: SKIP: ..." saying whether it is compiled in and
 * returns TAXI_TEST_SKIP_STATUS, for a family program to exit with. */
int taxi_test_backend_unavailable(const char *prefix, const char *backend);

int taxi_test_run(const char *title, const taxi_test_suite_t *const *suites,
                  size_t n, int argc, char **argv);

/*
 * One test family's program (the reactor conformance suites, the pools,
 * the proactor), which runs its suites over any of the backends:
 *
 *   PROG [BACKEND|all [FILTER]]
 *
 * BACKEND names the backend; with none (or "-") the family's variable
 * `env` (TAXI_BACKEND, TAXI_PROACTOR) names it, else the best one that
 * works here.  "all" runs the suites over every backend `list` gives, one
 * after the other, and ends with the grand total.  FILTER selects suites
 * as taxi_test_run() does ("--list" in place of BACKEND lists the suites
 * of the default backend).  `known` says whether a name is one taxi has
 * on some system: any other name is refused with exit status 2, while a
 * known backend that is not compiled in or does not work here is skipped
 * by `run` (77), saying why.  `run` runs the family over one backend,
 * with argv[1] (if any) the filter, and returns taxi_test_run()'s status.
 */
typedef int (*taxi_test_family_run_fn)(const char *backend, int argc,
                                       char **argv);
int taxi_test_family_main(const char *family, const char *env,
                          int (*known)(const char *name),
                          size_t (*list)(const char **out, size_t cap),
                          taxi_test_family_run_fn run, int argc, char **argv);

/* The readiness backends compiled in and working here, best first; how
 * many (at most cap are stored).  The names are static strings. */
size_t taxi_test_readiness_backends(const char **out, size_t cap);
/* The completion backends compiled in and working here, best first, then
 * the emulated Proactor over each other readiness backend that works
 * ("emulated:poll", ...); as above. */
size_t taxi_test_completion_backends(const char **out, size_t cap);
/* 1 when `name` is a readiness backend taxi has on some system ("epoll",
 * "apr:poll", ...), a completion backend ("uring", "emulated", ...), or a
 * completion backend over a readiness backend ("emulated:select"). */
int taxi_test_known_readiness(const char *name);
int taxi_test_known_completion(const char *name);

#endif /* TAXI_TESTS_RUNNER_H */
