/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/batch.c - what dispatching a message costs besides its own
 * transfers: under the readiness dispatchers the clock is read once per
 * batch of events (the wait's), not once or more per message (a stream's
 * round and a write its callback queued each read it before).  Counted
 * through the fault module's clock_gettime, on epoll, whose waits it
 * counts too; elsewhere, or without the module, the exchange runs alone.
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "fault/fault.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH_CONNS 32
#define BATCH_ROUNDS 50
#define BATCH_LEN 64

static void bt_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  if (status < 0 || taxi_stream_write(s, data, len, NULL, NULL) < 0)
    taxi_stream_end(s);
}

static void bt_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  taxi_stream_read_start(s, bt_read);
}

/* The pairs whose batches take their time from the wait: the reactor's
 * dispatchers, on the backend whose waits the module counts. */
static bool batch_clock_expected(void) {
  return strcmp(st_backend, "epoll") == 0 &&
         (st_dispatcher == TAXI_IO_REACTOR || st_dispatcher == TAXI_IO_LF ||
          st_dispatcher == TAXI_IO_HSHA);
}

static unsigned long waits_made(void) {
  return fault_calls("epoll_wait") + fault_calls("epoll_pwait");
}

/* Every connection sends at once, round after round: a batch holds
 * several messages, and each message takes a round of its stream and a
 * write queued by its callback. */
static void test_clock_per_batch(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, bt_accept, NULL, NULL);
  st_io_run(&c);
  int fd[BATCH_CONNS], opened = 0, bad = 0;
  while (opened < BATCH_CONNS && (fd[opened] = st_connect(port)) >= 0) opened++;
  CU_ASSERT_EQUAL_FATAL(opened, BATCH_CONNS);
  unsigned char out[BATCH_LEN], in[BATCH_LEN];
  unsigned long clock0 = 0, waits0 = 0;
  /* Round 0 starts the streams: counted from after it. */
  for (int r = 0; r <= BATCH_ROUNDS && !bad; r++) {
    if (r == 1) {
      clock0 = fault_calls("clock_gettime");
      waits0 = waits_made();
    }
    memset(out, 'a' + r % 26, sizeof out);
    for (int i = 0; i < BATCH_CONNS && !bad; i++)
      bad = net_send_all(fd[i], out, sizeof out) < 0;
    for (int i = 0; i < BATCH_CONNS && !bad; i++)
      bad = net_recv_all(fd[i], in, sizeof in) < 0 || in[0] != out[0];
  }
  unsigned long clock = fault_calls("clock_gettime") - clock0;
  unsigned long waits = waits_made() - waits0;
  CU_ASSERT_FALSE(bad);
  for (int i = 0; i < opened; i++) close(fd[i]);
  st_io_destroy(&c);
  if (!fault_available() || !batch_clock_expected()) {
    printf("(exchange only) ");
    return;
  }
  printf("(%d messages: %lu clock reads, %lu waits) ",
         BATCH_CONNS * BATCH_ROUNDS, clock, waits);
  /* The reactor's loop: a read per wait; the half-sync/half-async pool's
   * reactor thread one more per wait.  The Leader/Followers pool reads it
   * for its own accounting besides (a follower's time following, a
   * leader's run of events), which follows its batches, not the
   * messages.  Before, each message read it three times (its stream's two
   * rounds and the write its callback queued). */
  if (st_dispatcher == TAXI_IO_REACTOR) CU_ASSERT(clock <= waits + 4);
  if (st_dispatcher == TAXI_IO_HSHA) CU_ASSERT(clock <= 2 * waits + 16);
  CU_ASSERT(clock < 2 * BATCH_CONNS * BATCH_ROUNDS);
}

CU_TestInfo st_tests_batch[] = {
    {"the clock read once per batch, not per message", test_clock_per_batch},
    CU_TEST_INFO_NULL};
