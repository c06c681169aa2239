/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/inproc_dgram.c - the datagram path's system calls failed on
 * purpose: recvmmsg and sendmmsg (Linux's batches), sendmsg (segments
 * sent in one call, TAXI_DGRAM_GSO), recvmsg and sendto (the one-by-one
 * path of other systems: unreached on Linux, and said so), each with its
 * transient errors and its persistent ones, failed once and for ever.
 *
 * The workload, on each readiness dispatcher: an echoing endpoint, and a
 * client endpoint connected to it that sends eight datagrams (taxi_dgram_send)
 * and one run of four segments (taxi_dgram_send_segments), each numbered
 * and checked when its echo comes.  For each case the site's first call
 * after arming fails (or every call, "forever"), for a bounded time; then
 * the fault is cleared and four more round trips must complete.  Required:
 *   - every call returns 0 or a TAXI_E* code, and nothing crashes;
 *   - the endpoints recover: the four round trips after the fault complete
 *     (bounded: no hang);
 *   - a transient error (EINTR, EAGAIN, "short": a batch cut in half) loses
 *     nothing and is reported to no one: every echo comes back;
 *   - any other error that was injected is reported through the API: a
 *     call returns an error, or a receive callback gets an error status.
 * EINTR is not failed for ever: the ports retry an interrupted call, as
 * a signal is not sent for ever either, so that case could only spin.
 *
 * Besides, a kernel without UDP_SEGMENT or UDP_GRO (setsockopt says
 * ENOPROTOOPT): taxi_dgram_open refuses TAXI_DGRAM_GSO and TAXI_DGRAM_GRO
 * with TAXI_ENOTSUP and a detail naming the flag.
 */
#define _GNU_SOURCE 1

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault/fault.h"
#include "runner.h"
#include "taxi/taxi.h"
#include "util.h"

#define SIZE 300
#define FIRST 8 /* datagrams sent while the fault is armed */
#define SEGS 4  /* and one run of segments */
#define AFTER 4 /* round trips once it is cleared */
#define TOTAL (FIRST + SEGS + AFTER)
#define FAULT_MS 300

/* ---- the workload ------------------------------------------------------ */

typedef struct work {
  taxi_io_t *io;
  util_thread_t runner;
  int run_rc;
  taxi_dgram_t *srv, *cli;
  atomic_int echoed[TOTAL]; /* echoes of each datagram back at the client */
  atomic_int bad;           /* echoes with wrong bytes or length */
  atomic_int reported;      /* error statuses in receive callbacks */
  atomic_int not_code;      /* a status or return that is no TAXI_E* code */
  atomic_int returned;      /* errors returned by the calls */
  atomic_int closed;
} work_t;

static int is_code(int rc) { return rc == 0 || taxi_error_name(rc) != NULL; }

static void fill(unsigned char *p, unsigned seq) {
  for (size_t i = 0; i < SIZE; i++) p[i] = (unsigned char)(seq * 31u + i);
  p[0] = (unsigned char)seq;
}

static void note_status(work_t *w, int status) {
  atomic_fetch_add(&w->reported, 1);
  if (!is_code(status)) atomic_fetch_add(&w->not_code, 1);
}

static void serve(taxi_dgram_t *d, int status, const void *data, size_t len,
                  const taxi_addr_t *from, unsigned flags, void *arg) {
  work_t *w = arg;
  (void)flags;
  if (status < 0) {
    note_status(w, status);
    return;
  }
  int rc = taxi_dgram_send_to(d, data, len, from);
  if (rc < 0) {
    atomic_fetch_add(&w->returned, 1);
    if (!is_code(rc)) atomic_fetch_add(&w->not_code, 1);
  }
}

static void client_recv(taxi_dgram_t *d, int status, const void *data,
                        size_t len, const taxi_addr_t *from, unsigned flags,
                        void *arg) {
  work_t *w = arg;
  (void)d, (void)from, (void)flags;
  if (status < 0) {
    note_status(w, status);
    return;
  }
  unsigned char want[SIZE];
  unsigned seq = len ? ((const unsigned char *)data)[0] : TOTAL;
  if (seq >= TOTAL) {
    atomic_fetch_add(&w->bad, 1);
    return;
  }
  fill(want, seq);
  if (len != SIZE || memcmp(data, want, SIZE) != 0)
    atomic_fetch_add(&w->bad, 1);
  else
    atomic_fetch_add(&w->echoed[seq], 1);
}

static void on_closed(taxi_dgram_t *d, void *arg) {
  (void)d;
  atomic_fetch_add(&((work_t *)arg)->closed, 1);
}

static void run_io(void *arg) {
  work_t *w = arg;
  w->run_rc = taxi_io_run(w->io);
}

static void count_rc(work_t *w, int rc) {
  if (rc < 0) atomic_fetch_add(&w->returned, 1);
  if (!is_code(rc)) atomic_fetch_add(&w->not_code, 1);
}

static int echoes_of(work_t *w, unsigned from, unsigned to) {
  int n = 0;
  for (unsigned i = from; i < to; i++) n += atomic_load(&w->echoed[i]) > 0;
  return n;
}

/* Wait (bounded) until the echoes of [from, to) are back. */
static int wait_echoes(work_t *w, unsigned from, unsigned to, int max_ms) {
  for (int ms = 0; ms <= max_ms; ms++) {
    if (echoes_of(w, from, to) == (int)(to - from)) return 1;
    util_sleep_ms(1);
  }
  return 0;
}

static int setup(work_t *w, taxi_io_dispatcher_t disp) {
  memset(w, 0, sizeof *w);
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher = disp;
  o.threads = disp == TAXI_IO_REACTOR ? 1 : 2;
  if (taxi_io_create(&w->io, &o) < 0) return -1;
  taxi_dgram_options_t dop;
  taxi_dgram_options_init(&dop);
  dop.recv_batch = 8;
  dop.flags = TAXI_DGRAM_GSO;
  taxi_addr_t a;
  char text[TAXI_ADDR_STRLEN];
  int rc = taxi_dgram_open(&w->srv, w->io, "127.0.0.1:0", &dop, serve, w);
  if (rc == TAXI_ENOTSUP) { /* no UDP_SEGMENT: the sendmsg site goes */
    dop.flags = 0;
    rc = taxi_dgram_open(&w->srv, w->io, "127.0.0.1:0", &dop, serve, w);
  }
  if (rc < 0) return -1;
  if (taxi_dgram_open(&w->cli, w->io, "127.0.0.1:0", &dop, client_recv, w) <
          0 ||
      taxi_dgram_address(w->srv, &a) < 0 ||
      taxi_addr_format(&a, text, sizeof text) < 0 ||
      taxi_dgram_connect(w->cli, text) < 0)
    return -1;
  return util_thread_start(&w->runner, run_io, w) == 0 ? 0 : -1;
}

static int teardown(work_t *w) {
  int rc = 0;
  if (taxi_dgram_close(w->srv, on_closed, w) < 0) rc = -1;
  if (taxi_dgram_close(w->cli, on_closed, w) < 0) rc = -1;
  if (!util_wait_flag(&w->closed, 2, 5000)) rc = -1;
  taxi_io_stop(w->io);
  util_thread_join(&w->runner, 10000, "taxi_io_run");
  taxi_io_destroy(w->io);
  return rc;
}

/* ---- the cases --------------------------------------------------------- */

typedef struct site {
  const char *name;
  const char *errors[8];
} site_t;

static const site_t sites[] = {
    {"recvmmsg",
     {"EINTR", "EAGAIN", "short", "ENOMEM", "ECONNREFUSED", "EBADF", NULL}},
    {"sendmmsg",
     {"EINTR", "EAGAIN", "short", "ENOBUFS", "ENOMEM", "ECONNREFUSED",
      "EMSGSIZE", "EPERM"}},
    {"sendmsg",
     {"EINTR", "EAGAIN", "EIO", "ENOBUFS", "ECONNREFUSED", "EMSGSIZE", NULL}},
    {"recvmsg", {"EINTR", "EAGAIN", "ECONNREFUSED", NULL}},
    {"sendto", {"EINTR", "EAGAIN", "ENOBUFS", "EPERM", NULL}},
};

static int transient(const char *err) {
  return strcmp(err, "EINTR") == 0 || strcmp(err, "EAGAIN") == 0 ||
         strcmp(err, "short") == 0 ||
         /* sendmsg EIO: the device cannot send segments; they go one by
          * one instead, which loses nothing */
         strcmp(err, "EIO") == 0;
}

static void run_case(taxi_io_dispatcher_t disp, const char *site,
                     const char *err, int forever, int *reached) {
  work_t *w = calloc(1, sizeof *w);
  CU_ASSERT_FATAL(w != NULL);
  if (setup(w, disp) < 0) {
    CU_FAIL("set-up");
    free(w);
    return;
  }
  char rule[96];
  snprintf(rule, sizeof rule, "%s:1:%s:%d", site, err, forever ? 0 : 1);
  CU_ASSERT_EQUAL_FATAL(fault_arm(rule), 0);
  unsigned char buf[SEGS * SIZE];
  for (unsigned i = 0; i < FIRST; i++) {
    fill(buf, i);
    count_rc(w, taxi_dgram_send(w->cli, buf, SIZE));
  }
  for (unsigned i = 0; i < SEGS; i++) fill(buf + i * SIZE, FIRST + i);
  count_rc(w, taxi_dgram_send_segments(w->cli, buf, sizeof buf, SIZE, NULL));
  /* A transient error must lose nothing: wait for all, bounded. */
  int all = wait_echoes(w, 0, FIRST + SEGS, FAULT_MS);
  unsigned long injected = fault_injected(site);
  fault_arm("");
  /* Recovered: round trips one at a time, each bounded. */
  int recovered = 1;
  for (unsigned i = FIRST + SEGS; i < TOTAL && recovered; i++) {
    fill(buf, i);
    int rc = taxi_dgram_send(w->cli, buf, SIZE);
    count_rc(w, rc);
    recovered = rc == 0 && wait_echoes(w, i, i + 1, 5000);
  }
  if (!all) all = wait_echoes(w, 0, FIRST + SEGS, 1000);
  int reported = atomic_load(&w->reported) + atomic_load(&w->returned);
  int destroy = teardown(w);
  const char *verdict = "ok";
  int failed = 0;
  if (!recovered || destroy < 0 || atomic_load(&w->not_code) ||
      atomic_load(&w->bad)) {
    failed = 1;
  } else if (injected && transient(err) && !all) {
    failed = 1; /* a transient error lost datagrams */
  } else if (injected && !transient(err) && reported == 0) {
    failed = 1; /* an error no one was told of */
  }
  if (failed)
    verdict = "FAIL";
  else if (!injected)
    verdict = "unreached";
  *reached += injected > 0;
  printf("    %-8s %-9s %-13s %-7s %8lu %5d/%-2d %8d %9s  %s\n",
         taxi_io_dispatcher_name(disp), site, err, forever ? "forever" : "once",
         injected, echoes_of(w, 0, FIRST + SEGS), FIRST + SEGS, reported,
         recovered ? "yes" : "NO", verdict);
  CU_ASSERT_TRUE(recovered);
  CU_ASSERT_EQUAL(destroy, 0);
  CU_ASSERT_EQUAL(atomic_load(&w->not_code), 0);
  CU_ASSERT_EQUAL(atomic_load(&w->bad), 0);
  CU_ASSERT_FALSE(failed);
  free(w);
}

static void sweep(taxi_io_dispatcher_t disp) {
  if (!fault_available()) {
    printf("skipped: %s\n", fault_unavailable_reason());
    return;
  }
  int reached = 0;
  printf("\n    %-8s %-9s %-13s %-7s %8s %8s %8s %9s  %s\n", "disp", "site",
         "error", "mode", "injected", "echoes", "reported", "recovered",
         "outcome");
  for (size_t s = 0; s < sizeof sites / sizeof sites[0]; s++)
    for (int e = 0; e < 8 && sites[s].errors[e]; e++) {
      const char *err = sites[s].errors[e];
      run_case(disp, sites[s].name, err, 0, &reached);
      if (strcmp(err, "EINTR") != 0 && strcmp(err, "short") != 0)
        run_case(disp, sites[s].name, err, 1, &reached);
    }
  printf("    %d cases reached their site\n    ", reached);
  CU_ASSERT(reached > 0);
}

/* setsockopt refused as by a kernel that lacks the option. */
static void refused_flag(taxi_io_t *io, unsigned flag, const char *name) {
  taxi_dgram_options_t o;
  taxi_dgram_options_init(&o);
  o.flags = flag;
  taxi_dgram_t *d = NULL;
  CU_ASSERT_EQUAL_FATAL(fault_arm("setsockopt:1:ENOPROTOOPT:0"), 0);
  int rc = taxi_dgram_open(&d, io, "127.0.0.1:0", &o, serve, NULL);
  const char *why = taxi_error_detail();
  fault_arm("");
  CU_ASSERT_EQUAL(rc, TAXI_ENOTSUP);
  CU_ASSERT_PTR_NULL(d);
  CU_ASSERT_TRUE(why && strstr(why, name) != NULL);
  printf("    %s without the kernel's option: %s (%s)\n", name,
         taxi_error_name(rc), why ? why : "");
}

static void test_old_kernel(void) {
  if (!fault_available()) {
    printf("skipped: %s\n", fault_unavailable_reason());
    return;
  }
  taxi_io_t *io;
  CU_ASSERT_EQUAL_FATAL(taxi_io_create(&io, NULL), 0);
  printf("\n");
  refused_flag(io, TAXI_DGRAM_GSO, "TAXI_DGRAM_GSO");
  refused_flag(io, TAXI_DGRAM_GRO, "TAXI_DGRAM_GRO");
  taxi_io_destroy(io);
}

static void test_reactor(void) { sweep(TAXI_IO_REACTOR); }
static void test_lf(void) { sweep(TAXI_IO_LF); }
static void test_hsha(void) { sweep(TAXI_IO_HSHA); }

int main(int argc, char **argv) {
  fault_reexec_preloaded(argc, argv);
  static CU_TestInfo reactor[] = {
      {"every datagram call site failed", test_reactor},
      {"segments and coalescing refused without the kernel's options",
       test_old_kernel},
      CU_TEST_INFO_NULL};
  static CU_TestInfo lf[] = {{"every datagram call site failed", test_lf},
                             CU_TEST_INFO_NULL};
  static CU_TestInfo hsha[] = {{"every datagram call site failed", test_hsha},
                               CU_TEST_INFO_NULL};
  static taxi_test_suite_t suites[] = {
      {"datagram faults: reactor", reactor, 300, NULL},
      {"datagram faults: lf", lf, 300, NULL},
      {"datagram faults: hsha", hsha, 300, NULL}};
  const taxi_test_suite_t *list[] = {&suites[0], &suites[1], &suites[2]};
  return taxi_test_run("datagram fault sweep", list, 3, argc, argv);
}
