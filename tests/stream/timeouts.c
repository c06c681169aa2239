/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/timeouts.c - the timeout callback (on_timeout in the
 * stream options): a last message written there and the stream ended
 * arrives before the end of the stream; returning without a decision
 * closes as without it; new timeouts set there keep the stream; a timeout
 * during the end it asked for closes without calling it again.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SHORT (100 * TAXI_NSEC_PER_MSEC)

enum tmo_mode { SAY_BYE, DO_NOTHING, EXTEND_THEN_BYE, END_HUGE };

struct tmo_cb {
  enum tmo_mode mode;
  atomic_int calls, closed, reason, which, inside, overlaps;
  int rc_write, rc_end;
};

static const char bye[] = "bye: idle for too long\n";
static unsigned char *huge;
#define HUGE_LEN ((size_t)16 << 20)

static void tc_enter(struct tmo_cb *t) {
  if (atomic_exchange(&t->inside, 1)) atomic_fetch_add(&t->overlaps, 1);
}

static void tc_leave(struct tmo_cb *t) { atomic_store(&t->inside, 0); }

static void tc_huge_done(taxi_stream_t *s, int status, size_t b, void *a) {
  struct tmo_cb *t = taxi_stream_data(s);
  (void)status;
  (void)b;
  (void)a;
  tc_enter(t);
  tc_leave(t);
}

static void tc_timeout(taxi_stream_t *s, int which) {
  struct tmo_cb *t = taxi_stream_data(s);
  tc_enter(t);
  int n = atomic_fetch_add(&t->calls, 1) + 1;
  atomic_store(&t->which, which);
  switch (t->mode) {
    case SAY_BYE:
      t->rc_write = taxi_stream_write(s, bye, sizeof bye - 1, NULL, NULL);
      t->rc_end = taxi_stream_end(s);
      break;
    case DO_NOTHING:
      /* Queued, and dropped with the close that follows. */
      t->rc_write = taxi_stream_write(s, "x", 1, NULL, NULL);
      break;
    case EXTEND_THEN_BYE:
      if (n == 1) {
        t->rc_write = taxi_stream_set_timeouts(s, SHORT, 0, 0);
      } else {
        t->rc_write = taxi_stream_write(s, bye, sizeof bye - 1, NULL, NULL);
        t->rc_end = taxi_stream_end(s);
      }
      break;
    case END_HUGE:
      /* More than the peer, which reads nothing, takes: the end's flush
       * stalls, and its own timeout closes the stream. */
      t->rc_write =
          taxi_stream_write_ref(s, huge, HUGE_LEN, tc_huge_done, NULL);
      t->rc_end = taxi_stream_end(s);
      break;
  }
  tc_leave(t);
}

static void tc_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct tmo_cb *t = taxi_stream_data(s);
  (void)status;
  (void)data;
  (void)len;
  tc_enter(t);
  tc_leave(t);
}

static void tc_closed(taxi_stream_t *s, int reason) {
  struct tmo_cb *t = taxi_stream_data(s);
  tc_enter(t);
  atomic_store(&t->reason, reason);
  atomic_store(&t->closed, 1);
  tc_leave(t);
}

static void tc_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, tc_closed);
  taxi_stream_read_start(s, tc_read);
}

/* A server whose streams have `so` (on_timeout set), a client that sends
 * nothing and (unless rcvbuf) reads until the end of the stream: what it
 * read is in got (its length returned), or -1. */
static long tc_run(struct tmo_cb *t, taxi_stream_options_t *so, char *got,
                   size_t cap, int rcvbuf) {
  st_io_t c;
  if (st_io_create(&c) < 0) return -1;
  so->on_timeout = tc_timeout;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = so;
  int port = st_listen(&c, &lo, tc_accept, t, NULL);
  st_io_run(&c);
  int fd = st_connect_rcvbuf(port, rcvbuf);
  CU_ASSERT_FATAL(fd >= 0);
  long n = 0;
  if (rcvbuf) {
    /* Reads nothing until the stream has closed. */
    CU_ASSERT(util_wait_flag(&t->closed, 1, 20000));
  } else {
    n = st_recv_to_eof(fd, got, cap);
    CU_ASSERT(util_wait_flag(&t->closed, 1, 10000));
  }
  close(fd);
  st_io_destroy(&c);
  return n;
}

/* One case: what on_timeout does, the timeouts, how the client reads,
 * and what must come of it.  -1: not looked at. */
typedef struct tmo_case {
  enum tmo_mode mode;
  taxi_time_t idle, read, write; /* the stream's timeouts */
  int rcvbuf; /* 0: the client reads to the end; else it reads nothing */
  long got;   /* bytes the client read; sizeof bye - 1: bye, compared */
  int calls;  /* on_timeout's */
  int which;  /* the timeout told last */
  int reason; /* the close's */
  int rc_write, rc_end; /* what on_timeout's write (or set_timeouts) and
                           end returned */
  int overlaps;
} tmo_case_t;

#define BYE_LEN ((long)sizeof bye - 1)

static const tmo_case_t tmo_cases[] = {
    /* A last message and an end, idle: every byte, then the end. */
    {SAY_BYE, SHORT, 0, 0, 0, BYE_LEN, 1, TAXI_STREAM_TIMEOUT_IDLE, 0, 0, 0, 0},
    /* The same on the read timeout, told as such. */
    {SAY_BYE, 0, SHORT, 0, 0, BYE_LEN, -1, TAXI_STREAM_TIMEOUT_READ, 0, -1, -1,
     -1},
    /* Returning alone: the write made there is dropped with the close. */
    {DO_NOTHING, SHORT, 0, 0, 0, 0, 1, -1, TAXI_ETIMEDOUT, 0, -1, 0},
    /* New timeouts set there: the stream lives on after the first. */
    {EXTEND_THEN_BYE, SHORT, 0, 0, 0, BYE_LEN, 2, -1, 0, -1, -1, -1},
    /* A timeout during the end it asked for (the peer reads nothing):
     * closed, not told again. */
    {END_HUGE, SHORT, 0, 2 * SHORT, 4096, -1, 1, -1, TAXI_ETIMEDOUT, 0, 0, 0},
};

static void tmo_check(const tmo_case_t *k) {
  static struct tmo_cb t;
  memset(&t, 0, sizeof t);
  t.mode = k->mode;
  if (k->mode == END_HUGE) {
    huge = calloc(1, HUGE_LEN);
    CU_ASSERT_FATAL(huge != NULL);
  }
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.idle_timeout = k->idle;
  so.read_timeout = k->read;
  so.write_timeout = k->write;
  char got[256];
  long n = tc_run(&t, &so, k->rcvbuf ? NULL : got, k->rcvbuf ? 0 : sizeof got,
                  k->rcvbuf);
  if (k->got >= 0) CU_ASSERT_EQUAL(n, k->got);
  if (k->got == BYE_LEN)
    CU_ASSERT(n == BYE_LEN && memcmp(got, bye, sizeof bye - 1) == 0);
  if (k->calls >= 0) CU_ASSERT_EQUAL(atomic_load(&t.calls), k->calls);
  if (k->which >= 0) CU_ASSERT_EQUAL(atomic_load(&t.which), k->which);
  CU_ASSERT_EQUAL(atomic_load(&t.reason), k->reason);
  if (k->rc_write >= 0) CU_ASSERT_EQUAL(t.rc_write, k->rc_write);
  if (k->rc_end >= 0) CU_ASSERT_EQUAL(t.rc_end, k->rc_end);
  if (k->overlaps >= 0) CU_ASSERT_EQUAL(atomic_load(&t.overlaps), k->overlaps);
  free(huge);
  huge = NULL;
}

static void test_timeout_last_message(void) {
  tmo_check(&tmo_cases[0]);
  tmo_check(&tmo_cases[1]);
}

static void test_timeout_default(void) { tmo_check(&tmo_cases[2]); }

static void test_timeout_extended(void) { tmo_check(&tmo_cases[3]); }

static void test_timeout_during_end(void) { tmo_check(&tmo_cases[4]); }

CU_TestInfo st_tests_timeouts[] = {
    {"on_timeout: a last message and an end arrive before the EOF",
     test_timeout_last_message},
    {"on_timeout returning alone: closed with TAXI_ETIMEDOUT",
     test_timeout_default},
    {"on_timeout setting new timeouts: the stream lives on",
     test_timeout_extended},
    {"a timeout during the end on_timeout asked for: closed, not told",
     test_timeout_during_end},
    CU_TEST_INFO_NULL,
};
