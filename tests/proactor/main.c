/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/proactor/main.c - the proactor conformance program.
 *
 *   test_proactor [BACKEND|all [FILTER]]
 *
 * runs every proactor suite over one completion backend ("uring",
 * "emulated:poll", ...; by default TAXI_PROACTOR, else the best that
 * works here) or over each that works here ("all"); see
 * taxi_test_family_main.  BACKEND may end in a mode: "@one" makes every
 * proactor with TAXI_PROACTOR_ONE_THREAD (the suites that dispatch one
 * proactor from several threads skip what needs them), "@one-nodefer"
 * adds TAXI_PROACTOR_NO_DEFER_TASKRUN, "@plain" makes them with
 * TAXI_PROACTOR_NO_REGISTERED_FILES (io_uring without its table of
 * registered files).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>

static const taxi_test_suite_t *const pt_base_suites[] = {
    &pt_suite_stream,      &pt_suite_files,      &pt_suite_cancel,
    &pt_suite_timers,      &pt_suite_scale,      &pt_suite_dispatch,
    &pt_suite_pool,        &pt_suite_alloc,      &pt_suite_bad_input,
    &pt_suite_fd_reuse,    &pt_suite_emfile,     &pt_suite_signals,
    &pt_suite_counters,    &pt_suite_one_thread, &pt_suite_pooled,
    &pt_suite_group,       &pt_suite_group_api,  &pt_suite_regfiles,
    &pt_suite_stop_result, &pt_suite_dgram,
};
#define PT_N_SUITES (sizeof pt_base_suites / sizeof pt_base_suites[0])

/* 1 when `base` (the name before any ':') is a compiled-in backend. */
static int pt_compiled_in(const char *name) {
  size_t n = strcspn(name, ":");
  const char *names[16];
  int count = taxi_proactor_backend_names(names, 16);
  for (int i = 0; i < count && i < 16; i++)
    if (strlen(names[i]) == n && strncmp(names[i], name, n) == 0) return 1;
  return 0;
}

/* 0 when `backend` opens here; otherwise print why it is skipped and
 * return the skip status.  The reason is printed, never silent: a backend
 * that is compiled in but refused (io_uring under seccomp, EPERM) says so
 * with the OS error. */
static int pt_backend_unavailable(const char *backend) {
  if (!pt_compiled_in(backend)) {
    printf(
        "proactor[%s]: SKIP: backend \"%s\" is not compiled into this "
        "build of taxi\n",
        backend, backend);
    return TAXI_TEST_SKIP_STATUS;
  }
  taxi_proactor_t *p = NULL;
  int rc = util_proactor_create(&p, backend);
  if (rc == 0) {
    taxi_proactor_destroy(p);
    return 0;
  }
  int os = taxi_last_os_error();
  const char *variant = strchr(backend, ':');
  if (rc == TAXI_ENOBACKEND && variant) {
    printf(
        "proactor[%s]: SKIP: the readiness backend \"%s\" under it is not "
        "compiled in or does not work here\n",
        backend, variant + 1);
    return TAXI_TEST_SKIP_STATUS;
  }
  printf(
      "proactor[%s]: SKIP: backend \"%s\" is compiled in but this system "
      "refuses it: %s (%s), OS error %d (%s)\n",
      backend, backend, taxi_error_name(rc), taxi_strerror(rc), os,
      os ? strerror(os) : "none");
  return TAXI_TEST_SKIP_STATUS;
}

/* Split "BACKEND@MODE": the flags of the mode in util_proactor_flags, the
 * backend's name in `base`.  -1 for an unknown mode. */
static int pt_mode(const char *arg, char *base, size_t cap) {
  const char *at = strchr(arg, '@');
  size_t n = at ? (size_t)(at - arg) : strlen(arg);
  if (n >= cap) return -1;
  memcpy(base, arg, n);
  base[n] = '\0';
  util_proactor_flags = 0;
  if (!at) return 0;
  if (strcmp(at, "@one") == 0)
    util_proactor_flags = TAXI_PROACTOR_ONE_THREAD;
  else if (strcmp(at, "@one-nodefer") == 0)
    util_proactor_flags =
        TAXI_PROACTOR_ONE_THREAD | TAXI_PROACTOR_NO_DEFER_TASKRUN;
  else if (strcmp(at, "@plain") == 0)
    util_proactor_flags = TAXI_PROACTOR_NO_REGISTERED_FILES;
  else
    return -1;
  return 0;
}

static int run_backend(const char *arg, int argc, char **argv) {
  static char backend[64];
  if (pt_mode(arg, backend, sizeof backend) < 0) {
    printf("proactor[%s]: unknown backend mode (@one, @one-nodefer, @plain)\n",
           arg);
    return 2;
  }
  int skip = pt_backend_unavailable(backend);
  if (skip) return skip;
  pt_backend = backend;

  static taxi_test_suite_t suites[PT_N_SUITES];
  static char suite_names[PT_N_SUITES][96];
  const taxi_test_suite_t *list[PT_N_SUITES];
  for (size_t i = 0; i < PT_N_SUITES; i++) {
    suites[i] = *pt_base_suites[i];
    snprintf(suite_names[i], sizeof suite_names[i], "proactor[%s]: %s", arg,
             pt_base_suites[i]->name);
    suites[i].name = suite_names[i];
    list[i] = &suites[i];
  }
  char title[160];
  snprintf(title, sizeof title, "taxi proactor conformance: backend %s%s", arg,
           pt_small() ? " (TAXI_TEST_SMALL: reduced sizes)" : "");
  return taxi_test_run(title, list, PT_N_SUITES, argc, argv);
}

int main(int argc, char **argv) {
  return taxi_test_family_main(
      "proactor", "TAXI_PROACTOR", taxi_test_known_completion,
      taxi_test_completion_backends, run_backend, argc, argv);
}
