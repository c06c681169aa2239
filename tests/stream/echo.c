/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/echo.c - echo conversations: random segment sizes with
 * every byte checked, 1,000 streams at once, and no allocation per
 * message once running.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- random segments ------------------------------------------------------
 */

struct client_job {
  int port;
  unsigned seed;
  size_t total;
  int rc;
};

static void client_main(void *arg) {
  struct client_job *j = arg;
  j->rc = st_echo_client(j->port, j->total, 20000, j->seed);
}

static int all_closed(void *arg) {
  st_echo_t *e = arg;
  return atomic_load(&e->closed) == atomic_load(&e->accepted);
}

static void test_echo_random_segments(void) {
  enum { CLIENTS = 4 };
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.flags = TAXI_STREAM_PAUSE_READING;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, st_echo_accept, &e, NULL);
  st_io_run(&c);
  struct client_job jobs[CLIENTS];
  util_thread_t th[CLIENTS];
  size_t total = util_test_small() ? 200000 : 1000000;
  for (int i = 0; i < CLIENTS; i++) {
    jobs[i] = (struct client_job){port, (unsigned)i + 1, total, -1};
    CU_ASSERT_EQUAL(util_thread_start(&th[i], client_main, &jobs[i]), 0);
  }
  for (int i = 0; i < CLIENTS; i++) {
    util_thread_join(&th[i], 60000, "echo client");
    CU_ASSERT_EQUAL(jobs[i].rc, 0);
  }
  CU_ASSERT(st_wait(all_closed, &e, 10000));
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), CLIENTS);
  CU_ASSERT_EQUAL(atomic_load(&e.eofs), CLIENTS);
  CU_ASSERT_EQUAL(atomic_load(&e.write_errors), 0);
  CU_ASSERT(atomic_load(&e.max_queued) <= so.high_watermark);
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(c.io, &st), 0);
  CU_ASSERT_EQUAL(st.bytes_in, (uint64_t)total * CLIENTS);
  CU_ASSERT_EQUAL(st.bytes_out, (uint64_t)total * CLIENTS);
  CU_ASSERT_EQUAL(st.accepts, CLIENTS);
  CU_ASSERT_EQUAL(st.streams_opened, st.streams_closed);
  st_io_destroy(&c);
}

/* ---- 1,000 streams --------------------------------------------------------
 */

static void test_thousand_streams(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  /* select (FD_SETSIZE) watches descriptors below 1024 only, and this
   * process holds both ends of every connection. */
  int n = strstr(taxi_io_backend(c.io), "select") ? 300 : 1000;
  if (util_test_small()) n = 200; /* TSan, wine */
  if (!util_raise_nofile((unsigned long)n * 2 + 64)) {
    printf("(descriptor limit too low: %d streams instead) ", n / 4);
    n /= 4;
  }
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.read_buffer = 1024;
  so.high_watermark = 4096;
  so.low_watermark = 1024;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  lo.backlog = 4096;
  int port = st_listen(&c, &lo, st_echo_accept, &e, NULL);
  st_io_run(&c);
  int *fds = calloc((size_t)n, sizeof *fds);
  size_t *got = calloc((size_t)n, sizeof *got);
  int ok = fds && got;
  for (int i = 0; ok && i < n; i++) {
    fds[i] = st_connect(port);
    if (fds[i] < 0) {
      printf("connect %d: %s\n", i, strerror(errno));
      ok = 0;
      n = i;
    }
  }
  CU_ASSERT(ok);
  char msg[100];
  for (int i = 0; i < n; i++) {
    for (size_t k = 0; k < sizeof msg; k++)
      msg[k] = (char)st_byte((unsigned)i, k);
    CU_ASSERT_EQUAL(net_send_all(fds[i], msg, sizeof msg), 0);
  }
  /* Read every echo back, in any order of connections. */
  int done = 0, bad = 0;
  taxi_time_t start = taxi_now();
  while (done < n && util_elapsed_ms(start) < 60000) {
    for (int i = 0; i < n; i++) {
      if (got[i] == sizeof msg) continue;
      char buf[100];
      ssize_t k = recv(fds[i], buf, sizeof msg - got[i], MSG_DONTWAIT);
      if (k <= 0) continue;
      for (ssize_t j = 0; j < k; j++)
        if ((unsigned char)buf[j] != st_byte((unsigned)i, got[i] + (size_t)j))
          bad++;
      got[i] += (size_t)k;
      if (got[i] == sizeof msg) done++;
    }
    util_sleep_ms(1);
  }
  CU_ASSERT_EQUAL(done, n);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(atomic_load(&e.accepted), n);
  for (int i = 0; i < n; i++) close(fds[i]);
  CU_ASSERT(st_wait(all_closed, &e, 30000));
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT_EQUAL(st.streams_closed, (uint64_t)n);
  CU_ASSERT_EQUAL(st.bytes_out, (uint64_t)n * sizeof msg);
  free(fds);
  free(got);
  st_io_destroy(&c);
}

/* ---- no allocation per message ----------------------------------------------
 */

static void test_no_allocation_per_message(void) {
  CU_ASSERT_EQUAL(util_alloc_install(), 0);
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) {
    util_alloc_uninstall();
    return;
  }
  int port = st_listen(&c, NULL, st_echo_accept, &e, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT(fd >= 0);
  char out[200], in[200];
  memset(out, 'x', sizeof out);
  /* Warm up: the first stream, and the pool's threads, which allocate
   * their own state when they first run (on a loaded machine a spawned
   * thread may start late, hence the pause). */
  util_sleep_ms(300);
  for (int i = 0; i < 500 && fd >= 0; i++) {
    CU_ASSERT_EQUAL(net_send_all(fd, out, sizeof out), 0);
    CU_ASSERT_EQUAL(net_recv_all(fd, in, sizeof in), 0);
  }
  /* A backend's queue may still grow once under a burst larger than any
   * before (amortised, not per message): of three windows of messages,
   * one at least must allocate nothing. */
  int messages = util_test_small() ? 500 : 3000, clean = 0;
  for (int w = 0; w < 3 && !clean && fd >= 0; w++) {
    util_alloc_counts_t before = util_alloc_counts();
    for (int i = 0; i < messages; i++) {
      out[0] = (char)i;
      if (net_send_all(fd, out, sizeof out) ||
          net_recv_all(fd, in, sizeof in) || memcmp(in, out, sizeof in)) {
        CU_FAIL("echo");
        w = 3;
        break;
      }
    }
    util_alloc_counts_t after = util_alloc_counts();
    uint64_t n =
        after.mallocs + after.reallocs - before.mallocs - before.reallocs;
    printf("(%llu allocations over %d messages) ", (unsigned long long)n,
           messages);
    clean = n == 0;
  }
  CU_ASSERT(clean);
  if (fd >= 0) close(fd);
  CU_ASSERT(st_wait(all_closed, &e, 10000));
  st_io_destroy(&c);
  /* Every block taxi allocated was given back. */
  CU_ASSERT_EQUAL(util_alloc_counts().live, 0);
  util_alloc_uninstall();
}

CU_TestInfo st_tests_echo[] = {
    {"echo: random segments, every byte checked", test_echo_random_segments},
    {"1,000 streams at once", test_thousand_streams},
    {"no allocation per message in steady state",
     test_no_allocation_per_message},
    CU_TEST_INFO_NULL,
};
