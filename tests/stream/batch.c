/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/batch.c - what dispatching a message costs besides its own
 * transfers: under the readiness dispatchers the clock is read once per
 * batch of events (the wait's), not once or more per message (a stream's
 * round and a write its callback queued each read it before), and the
 * handles are not re-armed per message (no epoll_ctl under the Reactor
 * and the Leader/Followers pool).  Counted through the fault module's
 * clock_gettime and epoll_ctl, on epoll, whose waits it counts too;
 * elsewhere, or without the module, the exchange runs alone.  And what
 * the round that takes a read callback's writes along must still send:
 * writes another thread queued while the callback ran, and writes queued
 * by the write callbacks of that round.
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
  unsigned long clock0 = 0, waits0 = 0, ctl0 = 0;
  /* Round 0 starts the streams: counted from after it. */
  for (int r = 0; r <= BATCH_ROUNDS && !bad; r++) {
    if (r == 1) {
      clock0 = fault_calls("clock_gettime");
      waits0 = waits_made();
      ctl0 = fault_calls("epoll_ctl");
    }
    memset(out, 'a' + r % 26, sizeof out);
    for (int i = 0; i < BATCH_CONNS && !bad; i++)
      bad = net_send_all(fd[i], out, sizeof out) < 0;
    for (int i = 0; i < BATCH_CONNS && !bad; i++)
      bad = net_recv_all(fd[i], in, sizeof in) < 0 || in[0] != out[0];
  }
  unsigned long clock = fault_calls("clock_gettime") - clock0;
  unsigned long waits = waits_made() - waits0;
  unsigned long ctl = fault_calls("epoll_ctl") - ctl0;
  CU_ASSERT_FALSE(bad);
  for (int i = 0; i < opened; i++) close(fd[i]);
  st_io_destroy(&c);
  if (!fault_available() || !batch_clock_expected()) {
    printf("(exchange only) ");
    return;
  }
  printf("(%d messages: %lu clock reads, %lu waits, %lu epoll_ctl) ",
         BATCH_CONNS * BATCH_ROUNDS, clock, waits, ctl);
  /* The Reactor's handles are level-triggered and keep their interest
   * while a stream echoes; the Leader/Followers pool's are armed once,
   * edge-triggered.  (The half-sync/half-async pool re-arms a one-shot
   * handle after each event, by design.) */
  if (st_dispatcher == TAXI_IO_REACTOR || st_dispatcher == TAXI_IO_LF)
    CU_ASSERT(ctl <= 4);
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

/* ---- writes the read callback's round takes along ---------------------------
 *
 * The read callback of the stream waits, with a bound, for another thread
 * to queue "X" on its stream, then queues "Y" itself, with a write
 * callback that queues "Z" (during the round's write step).  The peer
 * must get all three, in that order, and no write may fail.
 */

struct along {
  _Atomic(taxi_stream_t *) s;
  atomic_int go, other_done, other_rc, own_rc, last_rc, reads;
  atomic_int z_told; /* along_z has stored last_rc */
};

static struct along along_state;

static void along_z(taxi_stream_t *s, int status, size_t len, void *arg) {
  struct along *a = arg;
  (void)len;
  if (status == 0)
    atomic_store(&a->last_rc, taxi_stream_write(s, "Z", 1, NULL, NULL));
  /* Last: "Z" may reach the peer before this callback returns. */
  atomic_store(&a->z_told, 1);
}

static void along_read(taxi_stream_t *s, int status, const void *data,
                       size_t len) {
  struct along *a = &along_state;
  (void)data;
  (void)len;
  if (status < 0 || atomic_fetch_add(&a->reads, 1) > 0) return;
  atomic_store(&a->s, s);
  atomic_store(&a->go, 1);
  /* Bounded: if the other thread never writes, "Y" goes alone and the
   * order check below fails instead of the test hanging. */
  (void)util_wait_flag(&a->other_done, 1, 5000);
  atomic_store(&a->own_rc, taxi_stream_write(s, "Y", 1, along_z, a));
}

static void along_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  taxi_stream_read_start(s, along_read);
}

static void along_other(void *arg) {
  struct along *a = arg;
  if (!util_wait_flag(&a->go, 1, 5000)) return;
  atomic_store(&a->other_rc,
               taxi_stream_write(atomic_load(&a->s), "X", 1, NULL, NULL));
  atomic_store(&a->other_done, 1);
}

static void test_writes_taken_along(void) {
  struct along *a = &along_state;
  atomic_store(&a->s, NULL);
  atomic_store(&a->go, 0);
  atomic_store(&a->other_done, 0);
  atomic_store(&a->reads, 0);
  atomic_store(&a->other_rc, 1);
  atomic_store(&a->own_rc, 1);
  atomic_store(&a->last_rc, 1);
  atomic_store(&a->z_told, 0);
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, along_accept, NULL, NULL);
  st_io_run(&c);
  util_thread_t other;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&other, along_other, a), 0);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  char in[4] = {0};
  CU_ASSERT_EQUAL(net_send_all(fd, "g", 1), 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, in, 3), 0);
  CU_ASSERT_STRING_EQUAL(in, "XYZ");
  util_thread_join(&other, 10000, "the thread writing to another's stream");
  /* The bytes came before the callbacks that sent them returned. */
  CU_ASSERT(util_wait_flag(&a->z_told, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&a->other_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&a->own_rc), 0);
  CU_ASSERT_EQUAL(atomic_load(&a->last_rc), 0);
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_batch[] = {
    {"the clock read once per batch, not per message", test_clock_per_batch},
    {"a round sends what was written during its read callback",
     test_writes_taken_along},
    CU_TEST_INFO_NULL};
