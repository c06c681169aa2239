/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/threads.c - a stream's callbacks never overlap, whatever
 * dispatches them: reads, write completions, the kicks of writes from
 * another thread and timeout timers all arrive in several threads at
 * once under the pools and the Proactor; and a write from another thread
 * while the stream's own callback runs is correct.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct serial {
  taxi_stream_t *s;
  atomic_int in_cb, overlaps, callbacks, accepted, foreign_done, closed;
  atomic_int foreign_acked, echo_refused;
  atomic_long foreign_bytes, echo_bytes;
};

static void enter(struct serial *z) {
  if (atomic_exchange(&z->in_cb, 1)) atomic_fetch_add(&z->overlaps, 1);
  atomic_fetch_add(&z->callbacks, 1);
}

static void leave(struct serial *z) { atomic_store(&z->in_cb, 0); }

static void z_written(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct serial *z = taxi_stream_data(s);
  (void)arg;
  enter(z);
  if (status == 0)
    atomic_fetch_add(arg ? &z->foreign_bytes : &z->echo_bytes, (long)bytes);
  if (arg) atomic_fetch_add(&z->foreign_acked, 1);
  leave(z);
}

static void z_read(taxi_stream_t *s, int status, const void *data, size_t len) {
  struct serial *z = taxi_stream_data(s);
  enter(z);
  if (status == 0 && taxi_stream_write(s, data, len, z_written, NULL) < 0)
    atomic_fetch_add(&z->echo_refused, 1);
  leave(z);
}

static void z_closed(taxi_stream_t *s, int reason) {
  struct serial *z = taxi_stream_data(s);
  (void)reason;
  enter(z);
  atomic_store(&z->closed, 1);
  leave(z);
}

static void z_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct serial *z = arg;
  (void)l;
  taxi_stream_set_data(s, z);
  taxi_stream_on_close(s, z_closed);
  /* Timeouts that keep the stream's timer busy without expiring. */
  taxi_stream_set_timeouts(s, 60 * TAXI_NSEC_PER_SEC, 60 * TAXI_NSEC_PER_SEC,
                           60 * TAXI_NSEC_PER_SEC);
  taxi_stream_ref(s); /* the foreign thread uses it */
  z->s = s;
  taxi_stream_read_start(s, z_read);
  atomic_store(&z->accepted, 1);
}

/* Writes from a thread that dispatches nothing: each is handed to the
 * stream's dispatcher. */
static void foreign_main(void *arg) {
  struct serial *z = arg;
  static const char msg[] = "foreign!";
  for (int i = 0; i < 3000; i++) {
    /* At most 512 queued, so the echo always finds a write record. */
    int rc = i - atomic_load(&z->foreign_acked) >= 512
                 ? TAXI_EAGAIN
                 : taxi_stream_write(z->s, msg, 8, z_written, z);
    if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) { /* room, records */
      util_sleep_ms(1);
      i--;
      continue;
    }
    if (rc < 0) break;
  }
  atomic_store(&z->foreign_done, 1);
}

static void test_callbacks_never_overlap(void) {
  st_io_t c;
  static struct serial z;
  memset(&z, 0, sizeof z);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.max_writes = 4096;
  so.high_watermark = 1 << 20;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, z_accept, &z, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_FATAL(util_wait_flag(&z.accepted, 1, 10000));
  util_thread_t th;
  CU_ASSERT_EQUAL(util_thread_start(&th, foreign_main, &z), 0);
  /* Send while reading back, until the foreign writer is done. */
  util_set_nonblock(fd);
  char buf[8192];
  memset(buf, 'e', sizeof buf);
  long sent = 0, got = 0;
  taxi_time_t start = taxi_now();
  while (util_elapsed_ms(start) < 20000) {
    if (!atomic_load(&z.foreign_done) || sent < 200000) {
      ssize_t k = send(fd, buf, 1000, MSG_NOSIGNAL);
      if (k > 0) sent += k;
    }
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k > 0) got += k;
    if (atomic_load(&z.foreign_done) && got == sent + 3000 * 8) break;
    if (k <= 0) util_sleep_ms(1);
  }
  util_thread_join(&th, 30000, "foreign writer");
  if (got != sent + 3000 * 8) {
    taxi_io_stats_t st;
    taxi_io_stats(c.io, &st);
    printf(
        "(after %lld ms: sent %ld, got %ld, echoed %ld, foreign %ld, in %llu "
        "out %llu) ",
        (long long)util_elapsed_ms(start), sent, got,
        atomic_load(&z.echo_bytes), atomic_load(&z.foreign_bytes),
        (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out);
  }
  CU_ASSERT_EQUAL(got, sent + 3000 * 8);
  /* The client may get the last bytes before their callbacks ran. */
  for (int i = 0;
       i < 10000 &&
       atomic_load(&z.echo_bytes) + atomic_load(&z.foreign_bytes) < got;
       i++)
    util_sleep_ms(1);
  CU_ASSERT_EQUAL(atomic_load(&z.foreign_bytes), 3000 * 8);
  CU_ASSERT_EQUAL(atomic_load(&z.echo_bytes), sent);
  CU_ASSERT_EQUAL(atomic_load(&z.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&z.echo_refused), 0);
  printf("(%d callbacks) ", atomic_load(&z.callbacks));
  close(fd);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&z.closed), 1);
  CU_ASSERT_EQUAL(taxi_stream_unref(z.s), 0);
}

/* ---- a foreign write while the stream's callback runs -----------------------
 */

struct inside {
  atomic_int request, answered;
  taxi_stream_t *s;
};

static void helper_main(void *arg) {
  struct inside *in = arg;
  for (int n = 1; n <= 50; n++) {
    if (!util_wait_flag(&in->request, n, 20000)) return;
    /* The stream's read callback is running now, waiting for this. */
    CU_ASSERT_EQUAL(taxi_stream_write(in->s, "b", 1, NULL, NULL), 0);
    atomic_store(&in->answered, n);
  }
}

static void in_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct inside *in = taxi_stream_data(s);
  (void)data;
  if (status < 0) return;
  for (size_t i = 0; i < len; i++) {
    CU_ASSERT_EQUAL(taxi_stream_write(s, "a", 1, NULL, NULL), 0);
    int n = atomic_load(&in->request) + 1;
    atomic_store(&in->request, n);
    CU_ASSERT(util_wait_flag(&in->answered, n, 20000));
  }
}

static void in_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct inside *in = arg;
  (void)l;
  in->s = s;
  taxi_stream_set_data(s, in);
  taxi_stream_read_start(s, in_read);
}

static void test_foreign_write_during_callback(void) {
  st_io_t c;
  static struct inside in;
  memset(&in, 0, sizeof in);
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, in_accept, &in, NULL);
  st_io_run(&c);
  util_thread_t th;
  CU_ASSERT_EQUAL(util_thread_start(&th, helper_main, &in), 0);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  char buf[2];
  int ok = 1;
  for (int i = 0; i < 50 && ok; i++) {
    ok = net_send_all(fd, "A", 1) == 0 && net_recv_all(fd, buf, 2) == 0 &&
         buf[0] == 'a' && buf[1] == 'b';
  }
  CU_ASSERT(ok);
  util_thread_join(&th, 30000, "helper");
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_threads[] = {
    {"callbacks of a stream never overlap", test_callbacks_never_overlap},
    {"a write from another thread during the stream's callback",
     test_foreign_write_during_callback},
    CU_TEST_INFO_NULL,
};
