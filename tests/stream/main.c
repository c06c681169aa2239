/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/main.c - the stream layer's test program.
 *
 *   test_stream [DISPATCHER:BACKEND [FILTER]]
 *
 * With a pair ("lf:epoll", "proactor:uring", "hsha:apr:poll"), or with
 * TAXI_DISPATCHER and TAXI_BACKEND in the environment, it runs every test
 * over that pair, as one CUnit suite named "stream[lf:epoll]"; a pair that
 * does not work here exits 77 (skipped), saying why.  With neither, it
 * runs one such suite per compiled-in pair that works: the three reactor
 * dispatchers over each readiness backend, the proactor over each
 * completion backend.  FILTER (or the only argument, when it names no
 * pair) selects suites by substring, as in every taxi test program.
 * `make check` runs one pair per test (tests/stream/pair.sh).
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "fault/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAIRS 64

static CU_TestInfo all_tests[256];
static taxi_test_suite_t suites[MAX_PAIRS];
static const taxi_test_suite_t *list[MAX_PAIRS];
static char names[MAX_PAIRS][96];
static size_t npairs;

static void collect_tests(void) {
  CU_TestInfo *parts[] = {
      st_tests_echo,          st_tests_flow,        st_tests_connect,
      st_tests_threads,       st_tests_misc,        st_tests_bad_input,
      st_tests_detach,        st_tests_group,       st_tests_closing,
      st_tests_adopt,         st_tests_cross,       st_tests_peer,
      st_tests_post,          st_tests_counters,    st_tests_timeouts,
      st_tests_pipe,          st_tests_resolve,     st_tests_accept,
      st_tests_dgram,         st_tests_pooled,      st_tests_edge,
      st_tests_dgram_gso,     st_tests_batch,       st_tests_dgram_order,
      st_tests_handoff,       st_tests_dgram_sizes, st_tests_records,
      st_tests_dgram_senders, st_tests_dgram_held,  st_tests_one_thread};
  /* TAXI_STREAM_TESTS=text: only the tests whose name has it (while
   * working on a few: each pair runs every test otherwise). */
  const char *only = getenv("TAXI_STREAM_TESTS");
  size_t n = 0;
  for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
    for (CU_TestInfo *t = parts[p];
         t->pName && n + 1 < sizeof all_tests / sizeof all_tests[0]; t++)
      if (!only || strstr(t->pName, only)) all_tests[n++] = *t;
  all_tests[n] = (CU_TestInfo)CU_TEST_INFO_NULL;
}

/* 0 when the pair works here, else a reason. */
static const char *pair_unavailable(taxi_io_dispatcher_t d,
                                    const char *backend) {
  static char why[160];
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = d;
  o.backend = backend;
  taxi_io_t *io;
  int rc = taxi_io_create(&io, &o);
  if (rc == 0) {
    taxi_io_destroy(io);
    return NULL;
  }
  snprintf(why, sizeof why, "%s (%s), OS error %d", taxi_error_name(rc),
           taxi_strerror(rc), taxi_last_os_error());
  return why;
}

static void add_pair(taxi_io_dispatcher_t d, const char *backend) {
  if (npairs == MAX_PAIRS) return;
  snprintf(names[npairs], sizeof names[npairs], "stream[%s:%s]",
           taxi_io_dispatcher_name(d), backend);
  suites[npairs].name = names[npairs];
  suites[npairs].tests = all_tests;
  suites[npairs].timeout_s = 300;
  suites[npairs].skip = NULL;
  list[npairs] = &suites[npairs];
  npairs++;
}

/* "lf:epoll" -> TAXI_IO_LF and "epoll"; 0 or -1. */
static int parse_pair(const char *text, taxi_io_dispatcher_t *d,
                      const char **backend) {
  char head[16];
  const char *colon = strchr(text, ':');
  if (!colon || (size_t)(colon - text) >= sizeof head) return -1;
  memcpy(head, text, (size_t)(colon - text));
  head[colon - text] = '\0';
  if (taxi_io_dispatcher_parse(head, d) < 0 || !colon[1]) return -1;
  *backend = colon + 1;
  return 0;
}

int main(int argc, char **argv) {
  taxi_io_dispatcher_t d;
  const char *backend = NULL;
  const char *env_d = getenv("TAXI_DISPATCHER"),
             *env_b = getenv("TAXI_BACKEND");
  fault_reexec_preloaded(argc, argv); /* for the injected accept failures */
  collect_tests();
  setvbuf(stdout, NULL, _IOLBF, 0);

  int pair_given = 0;
  if (argc > 1 && parse_pair(argv[1], &d, &backend) == 0) {
    pair_given = 1;
    argv[1] = argv[0];
    argc--;
    argv++;
  } else if (env_d && env_b && taxi_io_dispatcher_parse(env_d, &d) == 0) {
    pair_given = 1;
    backend = env_b;
  }
  if (pair_given) {
    const char *why = pair_unavailable(d, backend);
    if (why) {
      printf("stream[%s:%s]: SKIP: this pair does not work here: %s\n",
             taxi_io_dispatcher_name(d), backend, why);
      return TAXI_TEST_SKIP_STATUS;
    }
    add_pair(d, backend);
  } else {
    const char *rnames[32];
    int n = taxi_backend_names(rnames, 32);
    for (int i = 0; i < n && i < 32; i++)
      for (int k = TAXI_IO_REACTOR; k <= TAXI_IO_HSHA; k++)
        if (!pair_unavailable((taxi_io_dispatcher_t)k, rnames[i]))
          add_pair((taxi_io_dispatcher_t)k, rnames[i]);
    const char *pnames[16];
    int np = taxi_proactor_backend_names(pnames, 16);
    for (int i = 0; i < np && i < 16; i++)
      for (int k = TAXI_IO_PROACTOR; k <= TAXI_IO_PROACTORS; k++)
        if (!pair_unavailable((taxi_io_dispatcher_t)k, pnames[i]))
          add_pair((taxi_io_dispatcher_t)k, pnames[i]);
  }
  return taxi_test_run("taxi stream layer", list, npairs, argc, argv);
}
