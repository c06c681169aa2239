/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_hang_report.c - what the test helpers print when a test
 * hangs: util_hang (a thread past its test's bound) and the runner (a
 * suite past its time limit) both name what hung and, where gdb is
 * installed, print every thread's stack, so that a hang seen once in
 * hundreds of runs can be read in the log.  Each case runs in a child
 * process whose output is read back; the hung thread waits in a function
 * of this file, which its stack must show.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include "runner.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the hung thread waits: a read of a pipe nobody writes to.  Not
 * inlined, so that the stack names it. */
static int parked_fd = -1;

/* Open the pipe parked_in_read waits on; false if it cannot be made. */
static bool park_here(void) {
  int p[2];
  if (pipe(p) != 0) return false;
  parked_fd = p[0];
  return true;
}

__attribute__((noinline)) static void parked_in_read(void *arg) {
  char c;
  (void)arg;
  while (read(parked_fd, &c, 1) < 0 && errno == EINTR) {
  }
}

/* Run fn in a child whose stdout and stderr go to *out (NUL-terminated,
 * at most cap - 1 bytes); returns the child's wait status, or -1. */
static int capture(void (*fn)(void), char *out, size_t cap) {
  int p[2];
  if (pipe(p) != 0) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    fn();
    _exit(0);
  }
  close(p[1]);
  size_t have = 0;
  for (;;) {
    ssize_t n = read(p[0], out + have, cap - 1 - have);
    if (n > 0 && (have += (size_t)n) < cap - 1) continue;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  out[have] = '\0';
  close(p[0]);
  /* gdb is waited for at most 60 s; the rest takes well under a second. */
  return util_wait_child((int)pid, 120000);
}

/* Whether gdb can be started here: without it the helpers say so
 * instead of printing stacks. */
static int have_gdb(void) {
  return system("gdb --version >/dev/null 2>&1") == 0;
}

static void check_stacks(const char *out) {
  if (have_gdb()) {
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "parked_in_read"));
    CU_ASSERT_PTR_NULL(strstr(out, "(gdb did not"));
  } else {
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "(no stacks: gdb could not be started)"));
  }
}

static char output[1 << 17];

static void park_then_join(void) {
  if (!park_here()) _exit(10);
  util_thread_t t;
  if (util_thread_start(&t, parked_in_read, NULL) != 0) _exit(11);
  util_thread_join(&t, 100, "the parked thread");
  _exit(12); /* not reached: the join ends the process */
}

static void test_util_hang(void) {
  int status = capture(park_then_join, output, sizeof output);
  CU_ASSERT_FATAL(status != -1);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(output, "HANG: the parked thread"));
  check_stacks(output);
}

/* A suite whose one test waits past the suite's 1 s limit. */
static void parked_test(void) { parked_in_read(NULL); }

static CU_TestInfo parked_tests[] = {
    {"waits for a byte that never comes", parked_test}, CU_TEST_INFO_NULL};

/* This program's path: the parked suite runs in a fresh copy of it,
 * since CUnit, running this test, cannot start another run in the
 * forked child. */
static const char *self_path;

static void run_parked_suite(void) {
  setenv("TAXI_TEST_PARKED_SUITE", "1", 1);
  setenv("TAXI_TEST_TIMEOUT_SCALE", "1", 1);
  execl(self_path, self_path, (char *)NULL);
  _exit(13);
}

/* The parked suite, run by the copy above. */
static int parked_main(void) {
  if (!park_here()) return 10;
  static const taxi_test_suite_t parked = {
      .name = "parked", .tests = parked_tests, .timeout_s = 1};
  const taxi_test_suite_t *const suites[] = {&parked};
  char *argv[] = {"parked", NULL};
  return taxi_test_run("a suite that hangs", suites, 1, 1, argv);
}

static void test_runner_timeout(void) {
  int status = capture(run_parked_suite, output, sizeof output);
  CU_ASSERT_FATAL(status != -1);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(output, "suite parked: past its time limit; its threads:"));
  CU_ASSERT_PTR_NOT_NULL(strstr(output, "TIMEOUT in suite parked"));
  check_stacks(output);
}

static CU_TestInfo tests[] = {
    {"a thread past its bound: HANG, then every thread's stack",
     test_util_hang},
    {"a suite past its limit: TIMEOUT, then every thread's stack",
     test_runner_timeout},
    CU_TEST_INFO_NULL};

/* gdb may take seconds to attach (longer to a sanitized program). */
static const taxi_test_suite_t suite = {
    .name = "hang reports", .tests = tests, .timeout_s = 300};

int main(int argc, char **argv) {
  if (getenv("TAXI_TEST_PARKED_SUITE")) return parked_main();
  self_path = argv[0];
  const taxi_test_suite_t *const suites[] = {&suite};
  return taxi_test_run("test helpers: hang reports", suites, 1, argc, argv);
}
