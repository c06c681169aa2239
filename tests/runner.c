/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/runner.c - fork-per-suite CUnit harness; see runner.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "runner.h"

#include "taxi/taxi.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

/* What a child tells its parent: sent before each test and once at the end.
 * Smaller than PIPE_BUF, so each write arrives whole. */
typedef struct report {
  unsigned run;    /* tests completed */
  unsigned failed; /* of those, tests with a failed assertion */
  unsigned asserts;
  unsigned asserts_failed;
  unsigned failures; /* CUnit failure records (incl. suite set-up) */
  int final;         /* 1: the suite ran to its end */
  char current[112]; /* the test starting now ("" at the end) */
} report_t;

/* What the parent concludes about one suite. */
typedef struct outcome {
  const char *name;
  unsigned total; /* tests in the suite */
  report_t last;  /* the last report received */
  int got_report;
  int timed_out;
  int signal;      /* the signal that killed the child, or 0 */
  int exit_status; /* the child's exit status, or -1 */
  unsigned passed, failed, not_run;
  const char *verdict;
} outcome_t;

static int child_report_fd = -1;

#if defined(_WIN32)
/* In-process runs (see run_suite below): the last report, for the parent
 * part and for the watchdog, which names the running test on a time-out. */
static report_t win_report;
static CRITICAL_SECTION win_report_lock;
#endif

/* ---- the child ---------------------------------------------------------- */

#if !defined(_WIN32)
static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    len -= (size_t)n;
  }
}

#endif /* !_WIN32 */

static void child_report(int final) {
  if (child_report_fd < 0) return;
  report_t rep;
  memset(&rep, 0, sizeof rep);
  CU_pRunSummary s = CU_get_run_summary();
  if (s) {
    rep.run = s->nTestsRun;
    rep.failed = s->nTestsFailed;
    rep.asserts = s->nAsserts;
    rep.asserts_failed = s->nAssertsFailed;
    rep.failures = s->nFailureRecords;
  }
  rep.final = final;
  if (!final) {
    CU_pTest t = CU_get_current_test();
    if (t && t->pName)
      snprintf(rep.current, sizeof rep.current, "%s", t->pName);
  }
#if defined(_WIN32)
  EnterCriticalSection(&win_report_lock);
  win_report = rep;
  LeaveCriticalSection(&win_report_lock);
#else
  write_all(child_report_fd, &rep, sizeof rep);
#endif
}

/* CUnit calls this before every test of the suite. */
static void before_each_test(void) { child_report(0); }

static int run_child(const taxi_test_suite_t *suite, int fd) {
#if !defined(_WIN32)
  setpgid(0, 0);
  signal(SIGPIPE, SIG_IGN);
  util_allow_stack_printing(); /* for the parent's gdb at a timeout */
#endif
  /* Unbuffered, so that what a test printed survives a crash. */
  setvbuf(stdout, NULL, _IONBF, 0);
  child_report_fd = fd;

  if (CU_initialize_registry() != CUE_SUCCESS) {
    fprintf(stderr, "CU_initialize_registry failed: %s\n", CU_get_error_msg());
    return 100;
  }
  CU_pSuite cs = CU_add_suite_with_setup_and_teardown(suite->name, NULL, NULL,
                                                      before_each_test, NULL);
  if (!cs) {
    fprintf(stderr, "CU_add_suite(%s) failed: %s\n", suite->name,
            CU_get_error_msg());
    CU_cleanup_registry();
    return 100;
  }
  for (const CU_TestInfo *t = suite->tests; t && t->pName; t++) {
    if (!CU_add_test(cs, t->pName, t->pTestFunc)) {
      fprintf(stderr, "CU_add_test(%s) failed: %s\n", t->pName,
              CU_get_error_msg());
      CU_cleanup_registry();
      return 100;
    }
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  child_report(1);

  unsigned bad = CU_get_number_of_failures();
  if (bad == 0) bad = CU_get_number_of_tests_failed();
  if (bad == 0) bad = CU_get_number_of_suites_failed();
  if (bad > 100) bad = 100;
  CU_cleanup_registry();
  fflush(stdout);
  return (int)bad;
}

/* ---- the parent --------------------------------------------------------- */

static double timeout_scale(void) {
  const char *s = getenv("TAXI_TEST_TIMEOUT_SCALE");
  if (!s || !*s) return 1.0;
  char *end;
  double k = strtod(s, &end);
  return (end != s && k >= 1.0) ? k : 1.0;
}

static void begin_outcome(const taxi_test_suite_t *suite, outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->name = suite->name;
  o->exit_status = -1;
  for (const CU_TestInfo *t = suite->tests; t && t->pName; t++) o->total++;
}

#if defined(_WIN32)
/*
 * Windows has no fork(): the suite runs in this process, and a watchdog
 * thread enforces its time limit.  A suite that overruns cannot be
 * stopped on its own (its threads may hold locks), so the watchdog names
 * the test that was running, prints the failure line the totals are read
 * from, and ends the whole process with status 1.  A crash likewise ends
 * the process; the runner's own output then stops in that suite.
 */
typedef struct watchdog {
  HANDLE done; /* set when the suite returned */
  DWORD limit_ms;
  const char *suite;
  unsigned limit_s;
} watchdog_t;

static DWORD WINAPI watchdog_main(void *p) {
  watchdog_t *w = p;
  if (WaitForSingleObject(w->done, w->limit_ms) == WAIT_OBJECT_0) return 0;
  EnterCriticalSection(&win_report_lock);
  report_t r = win_report;
  LeaveCriticalSection(&win_report_lock);
  printf(
      "\nTIMEOUT in suite %s: test \"%s\" still running after %u s; "
      "ending the test program\n%u passed, %u failed\n",
      w->suite, r.current[0] ? r.current : "?", w->limit_s,
      r.run > r.failed ? r.run - r.failed : 0, r.failed + 1);
  fflush(stdout);
  TerminateProcess(GetCurrentProcess(), 1);
  return 0;
}

static void run_suite(const taxi_test_suite_t *suite, outcome_t *o) {
  static int lock_ready;
  begin_outcome(suite, o);
  if (!lock_ready) {
    InitializeCriticalSection(&win_report_lock);
    lock_ready = 1;
  }
  memset(&win_report, 0, sizeof win_report);
  unsigned limit =
      suite->timeout_s ? suite->timeout_s : TAXI_TEST_DEFAULT_TIMEOUT_S;
  watchdog_t w = {CreateEventW(NULL, TRUE, FALSE, NULL),
                  (DWORD)((double)limit * timeout_scale() * 1000.0),
                  suite->name, limit};
  HANDLE th = w.done ? CreateThread(NULL, 0, watchdog_main, &w, 0, NULL) : NULL;
  if (!th) {
    printf("\nHARNESS ERROR: no watchdog thread for suite %s\n", suite->name);
    if (w.done) CloseHandle(w.done);
    o->failed = 1;
    o->verdict = "HARNESS ERROR";
    return;
  }
  fflush(stdout);
  child_report_fd = 0; /* reports go to win_report */
  o->exit_status = run_child(suite, 0);
  child_report_fd = -1;
  SetEvent(w.done);
  WaitForSingleObject(th, INFINITE);
  CloseHandle(th);
  CloseHandle(w.done);

  o->last = win_report;
  o->got_report = 1;
  o->passed = o->last.run - o->last.failed;
  o->failed = o->last.failed;
  o->not_run = o->total > o->last.run ? o->total - o->last.run : 0;
  if (!o->last.final) {
    o->failed += 1;
    o->verdict = "HARNESS ERROR";
  } else if (o->failed > 0 || o->last.failures > 0) {
    if (o->failed == 0) o->failed = 1;
    o->verdict = "FAILED";
  } else {
    o->verdict = "ok";
  }
  fflush(stdout);
}

#else /* POSIX: one child process per suite */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Read whole reports from fd (non-blocking); keep the last. */
static void drain_reports(int fd, outcome_t *o, char *buf, size_t *have) {
  for (;;) {
    ssize_t n = read(fd, buf + *have, sizeof(report_t) - *have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    *have += (size_t)n;
    if (*have == sizeof(report_t)) {
      memcpy(&o->last, buf, sizeof(report_t));
      o->last.current[sizeof o->last.current - 1] = '\0';
      o->got_report = 1;
      *have = 0;
    }
  }
}

static const char *signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGTRAP:
      return "SIGTRAP";
    default:
      return "signal";
  }
}

/* The lowest descriptor of the child's report pipe (see run_suite). */
#define REPORT_FD_MIN 200

static void run_suite(const taxi_test_suite_t *suite, outcome_t *o) {
  begin_outcome(suite, o);

  int p[2];
  if (pipe(p) != 0) {
    perror("pipe");
    o->failed = 1;
    o->verdict = "HARNESS ERROR";
    return;
  }
  /* The child's end far above the descriptors a library may still think
   * it owns: libkqueue's fork handler closes, in the child, the internal
   * descriptors of kqueues the parent has closed but libkqueue has not yet
   * noticed, numbers the kernel may since have given to this pipe. */
  int high = fcntl(p[1], F_DUPFD, REPORT_FD_MIN);
  if (high >= 0) {
    close(p[1]);
    p[1] = high;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    close(p[0]);
    close(p[1]);
    o->failed = 1;
    o->verdict = "HARNESS ERROR";
    return;
  }
  if (pid == 0) {
    close(p[0]);
    exit(run_child(suite, p[1]));
  }
  setpgid(pid, pid); /* also done by the child; whichever comes first */
  close(p[1]);
  fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);

  unsigned limit =
      suite->timeout_s ? suite->timeout_s : TAXI_TEST_DEFAULT_TIMEOUT_S;
  double deadline = now_s() + (double)limit * timeout_scale();
  char buf[sizeof(report_t)];
  size_t have = 0;
  int status = 0;
  for (;;) {
    drain_reports(p[0], o, buf, &have);
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      perror("waitpid");
      break;
    }
    if (now_s() > deadline) {
      o->timed_out = 1;
      printf("\nsuite %s: past its time limit; its threads:\n", o->name);
      util_print_stacks((long)pid);
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    sleep_ms(10);
  }
  drain_reports(p[0], o, buf, &have);
  close(p[0]);
  /* Whatever the suite forked and left behind goes with it. */
  kill(-pid, SIGKILL);

  const report_t *r = &o->last;
  unsigned run = o->got_report ? r->run : 0;
  unsigned failed = o->got_report ? r->failed : 0;
  o->passed = run - failed;
  o->failed = failed;
  o->not_run = o->total > run ? o->total - run : 0;
  const char *current = (o->got_report && r->current[0]) ? r->current : "?";

  if (o->timed_out) {
    printf(
        "\nTIMEOUT in suite %s: test \"%s\" still running after %u s; "
        "killed its process group\n",
        o->name, current, limit);
    o->failed += 1; /* the test that hung */
    if (o->not_run) o->not_run--;
    o->verdict = "TIMEOUT";
  } else if (WIFSIGNALED(status)) {
    o->signal = WTERMSIG(status);
    printf("\nCRASH in suite %s: killed by %s (%d) during test \"%s\"\n",
           o->name, signal_name(o->signal), o->signal, current);
    o->failed += 1;
    if (o->not_run) o->not_run--;
    o->verdict = "CRASHED";
  } else if (WIFEXITED(status)) {
    o->exit_status = WEXITSTATUS(status);
    if (!o->got_report || !r->final) {
      printf(
          "\nEARLY EXIT in suite %s: exited with status %d during test "
          "\"%s\"\n",
          o->name, o->exit_status, current);
      o->failed += 1;
      if (o->not_run) o->not_run--;
      o->verdict = "EXITED";
    } else if (o->failed > 0 || r->failures > 0) {
      if (o->failed == 0) o->failed = 1; /* a suite-level failure */
      o->verdict = "FAILED";
    } else if (o->exit_status != 0) {
      printf(
          "\nSuite %s: every test passed but the process exited with "
          "status %d (a sanitizer report?)\n",
          o->name, o->exit_status);
      o->failed += 1;
      o->verdict = "FAILED";
    } else {
      o->verdict = "ok";
    }
  } else {
    o->failed += 1;
    o->verdict = "HARNESS ERROR";
  }
  fflush(stdout);
}
#endif /* POSIX */

/* Every taxi_test_run() of this process, for the total of "all". */
static unsigned grand_passed, grand_failed;

static int suites_skipped(const outcome_t *o) {
  return o->verdict && strcmp(o->verdict, "SKIPPED") == 0;
}

int taxi_test_run(const char *title, const taxi_test_suite_t *const *suites,
                  size_t n, int argc, char **argv) {
  const char *skip = getenv("TAXI_TEST_SKIP");
  if (skip && *skip && strcmp(skip, "0") != 0) {
    printf("%s: skipped (TAXI_TEST_SKIP=%s)\n", title, skip);
    return TAXI_TEST_SKIP_STATUS;
  }
  const char *filter = argc > 1 ? argv[1] : NULL;
  if (filter && strcmp(filter, "--list") == 0) {
    for (size_t i = 0; i < n; i++) printf("%s\n", suites[i]->name);
    return 0;
  }

  outcome_t *out = calloc(n ? n : 1, sizeof *out);
  if (!out) {
    perror("calloc");
    return 1;
  }
  size_t ran = 0;
  printf("%s\n", title);
  for (size_t i = 0; i < n; i++) {
    if (filter && !strstr(suites[i]->name, filter)) continue;
    if (suites[i]->skip) {
      begin_outcome(suites[i], &out[ran]);
      out[ran].verdict = "SKIPPED";
      printf("\nSKIP suite %s (%u tests): %s\n", suites[i]->name,
             out[ran].total, suites[i]->skip);
    } else {
      run_suite(suites[i], &out[ran]);
    }
    ran++;
  }
  if (ran == 0) {
    printf("%s: no suite matches \"%s\": skipped\n", title,
           filter ? filter : "");
    free(out);
    return TAXI_TEST_SKIP_STATUS;
  }

  unsigned passed = 0, failed = 0, not_run = 0, asserts = 0, afailed = 0;
  unsigned skipped = 0;
  printf("\n==== Summary: %s ====\n", title);
  printf("%-44s %6s %6s %6s %6s %8s %7s  %s\n", "Suite", "Tests", "Passed",
         "Failed", "NotRun", "Asserts", "AFailed", "Result");
  for (size_t i = 0; i < ran; i++) {
    const outcome_t *o = &out[i];
    printf("%-44s %6u %6u %6u %6u %8u %7u  %s\n", o->name, o->total, o->passed,
           o->failed, o->not_run, o->last.asserts, o->last.asserts_failed,
           o->verdict);
    if (suites_skipped(o)) skipped += o->total;
    passed += o->passed;
    failed += o->failed;
    not_run += o->not_run;
    asserts += o->last.asserts;
    afailed += o->last.asserts_failed;
  }
  printf("%-44s %6s %6u %6u %6u %8u %7u\n", "Total", "", passed, failed,
         not_run, asserts, afailed);
  if (skipped)
    printf("%u tests in suites skipped on this platform (reasons above)\n",
           skipped);
  printf("%u passed, %u failed\n", passed, failed);
  grand_passed += passed;
  grand_failed += failed;
  free(out);
  return (failed > 0 || not_run > 0) ? 1 : 0;
}

int taxi_test_backend_unavailable(const char *prefix, const char *backend) {
  const char *names[32];
  int n = taxi_backend_names(names, sizeof names / sizeof names[0]);
  for (int i = 0; i < n && i < 32; i++)
    if (strcmp(names[i], backend) == 0) return 0;
  int compiled = 0;
  for (size_t i = 0; i < taxi_backend_count(); i++) {
    taxi_backend_info_t info;
    if (taxi_backend_info(&info, i) == 0 && info.name &&
        strcmp(info.name, backend) == 0)
      compiled = 1;
  }
  printf("%s[%s]: SKIP: backend \"%s\" %s\n", prefix, backend, backend,
         compiled ? "is compiled in but does not work on this machine"
                  : "is not compiled into this build of taxi");
  return TAXI_TEST_SKIP_STATUS;
}

/* ---- test families ---------------------------------------------------- */

/* The readiness backends of the systems taxi runs on, so that one not
 * built here is told from a misspelt name (a backend this build has is
 * known in any case). */
static const char *const known_readiness[] = {
    "epoll",     "kqueue",     "poll",     "select",   "wsapoll",    "apr",
    "apr:epoll", "apr:kqueue", "apr:port", "apr:poll", "apr:select",
};
/* The completion backends, each alone or over a readiness backend. */
static const char *const known_completion[] = {"uring", "iocp", "aio",
                                               "emulated"};

int taxi_test_known_readiness(const char *name) {
  for (size_t i = 0; i < sizeof known_readiness / sizeof known_readiness[0];
       i++)
    if (strcmp(known_readiness[i], name) == 0) return 1;
  return 0;
}

int taxi_test_known_completion(const char *name) {
  size_t n = strcspn(name, ":@");
  for (size_t i = 0; i < sizeof known_completion / sizeof known_completion[0];
       i++) {
    if (strlen(known_completion[i]) != n ||
        strncmp(known_completion[i], name, n) != 0)
      continue;
    /* "@mode": the family program checks the mode. */
    return name[n] == '\0' || name[n] == '@' ||
           taxi_test_known_readiness(name + n + 1);
  }
  return 0;
}

size_t taxi_test_readiness_backends(const char **out, size_t cap) {
  int n = taxi_backend_names(out, cap);
  if (n < 0) return 0;
  return (size_t)n < cap ? (size_t)n : cap;
}

static void add_name(const char **out, size_t cap, size_t *n,
                     const char *name) {
  if (*n < cap) out[*n] = name;
  (*n)++;
}

size_t taxi_test_completion_backends(const char **out, size_t cap) {
  /* "emulated:R" strings live as long as the program. */
  static char variants[16][32];
  size_t n = 0, nv = 0;
  const char *names[16];
  int count = taxi_proactor_backend_names(names, 16);
  for (int i = 0; i < count && i < 16; i++) {
    taxi_proactor_t *p = NULL;
    if (util_proactor_create(&p, names[i]) != 0) continue;
    taxi_proactor_destroy(p);
    add_name(out, cap, &n, names[i]);
  }
  /* The plain emulated Proactor runs over the best readiness backend: the
   * others once each.  APR's methods stay out (its own family, the
   * reactor's, covers them). */
  const char *r[32];
  size_t nr = taxi_test_readiness_backends(r, 32);
  for (size_t i = 1; i < nr && nv < 16; i++) {
    if (strchr(r[i], ':') || strncmp(r[i], "apr", 3) == 0) continue;
    snprintf(variants[nv], sizeof variants[nv], "emulated:%s", r[i]);
    taxi_proactor_t *p = NULL;
    if (util_proactor_create(&p, variants[nv]) != 0) continue;
    taxi_proactor_destroy(p);
    add_name(out, cap, &n, variants[nv++]);
  }
  return n < cap ? n : cap;
}

int taxi_test_family_main(const char *family, const char *env,
                          int (*known)(const char *name),
                          size_t (*list)(const char **out, size_t cap),
                          taxi_test_family_run_fn run, int argc, char **argv) {
  const char *names[64];
  size_t n = list(names, sizeof names / sizeof names[0]);
  const char *arg = argc > 1 ? argv[1] : NULL;
  char *sub[3] = {argv[0], argc > 2 ? argv[2] : NULL, NULL};
  int sub_argc = argc > 2 ? 2 : 1;

  if (arg && strcmp(arg, "--list") == 0) {
    sub[1] = argv[1];
    sub_argc = 2;
    arg = NULL;
  }
  if (arg && strcmp(arg, "all") == 0) {
    if (n == 0) {
      printf("%s: no backend works here: skipped\n", family);
      return TAXI_TEST_SKIP_STATUS;
    }
    int status = TAXI_TEST_SKIP_STATUS;
    for (size_t i = 0; i < n; i++) {
      int rc = run(names[i], sub_argc, sub);
      if (rc == TAXI_TEST_SKIP_STATUS) continue;
      if (rc != 0)
        status = 1;
      else if (status == TAXI_TEST_SKIP_STATUS)
        status = 0;
    }
    printf("\n==== %s over %u backends ====\n%u passed, %u failed\n", family,
           (unsigned)n, grand_passed, grand_failed);
    return status;
  }
  const char *backend = arg && strcmp(arg, "-") != 0 ? arg : NULL;
  if (!backend) {
    const char *e = getenv(env);
    if (e && *e) backend = e;
  }
  if (!backend) {
    if (n == 0) {
      printf("%s: no backend works here: skipped\n", family);
      return TAXI_TEST_SKIP_STATUS;
    }
    backend = names[0];
  }
  /* Unknown: neither a backend of this build (a new one is known by being
   * compiled in) nor one of another system's. */
  int listed = 0;
  for (size_t i = 0; i < n && !listed; i++)
    listed = strcmp(names[i], backend) == 0;
  if (!listed && !known(backend)) {
    fprintf(stderr, "%s: unknown backend \"%s\"; this build has:", family,
            backend);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
    fprintf(stderr, " (or \"all\")\nusage: %s [BACKEND|all [FILTER]]\n",
            argv[0]);
    return 2;
  }
  return run(backend, sub_argc, sub);
}
