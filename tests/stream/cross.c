/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/cross.c - work a stream is given from outside its own
 * callbacks: a write made by another stream's callback or by a thread
 * that dispatches nothing must be flushed with no further event on the
 * target (no byte from its peer, no timer of its own), and a stream whose
 * reading was stopped in its own read callback and started again by
 * another stream's callback (a relay's backpressure) must go on moving
 * bytes both ways.  Under the pools these calls race with the worker that
 * processes the target's previous event, which is what they exercise.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes a client keeps in flight at most: far below every watermark, so
 * that a write is never refused and nothing but a lost hand-off can hold
 * bytes back. */
#define IN_FLIGHT 4096
/* A stream that makes no progress for this long is stuck: a bound on the
 * wait, not a measure of speed. */
#define STUCK_MS 5000

/* Two accepted streams, in the order their clients connected. */
struct two {
  taxi_stream_t *s[2];
  atomic_int accepted, closed;
  atomic_int refused; /* writes refused (none should be) */
  atomic_long relayed[2];
  taxi_stream_read_fn read_fn[2];
};

static void two_closed(taxi_stream_t *s, int reason) {
  struct two *t = taxi_stream_data(s);
  (void)reason;
  atomic_fetch_add(&t->closed, 1);
}

static void two_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct two *t = arg;
  (void)l;
  int i = atomic_load(&t->accepted);
  taxi_stream_set_data(s, t);
  taxi_stream_on_close(s, two_closed);
  taxi_stream_ref(s); /* used by the test after its close */
  t->s[i] = s;
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, t->read_fn[i]), 0);
  atomic_store(&t->accepted, i + 1);
}

/* Listen, connect two clients one after the other (so that the first
 * accepted stream is the first client's), and wait for both streams. */
static int two_connect(st_io_t *c, struct two *t, int fds[2]) {
  int port = st_listen(c, NULL, two_accept, t, NULL);
  if (port < 0) return -1;
  st_io_run(c);
  for (int i = 0; i < 2; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT_FATAL(fds[i] >= 0);
    CU_ASSERT_FATAL(util_wait_flag(&t->accepted, i + 1, 10000));
  }
  util_set_nonblock(fds[0]);
  util_set_nonblock(fds[1]);
  return 0;
}

static void two_finish(st_io_t *c, struct two *t, int fds[2]) {
  close(fds[0]);
  close(fds[1]);
  st_io_destroy(c);
  CU_ASSERT_EQUAL(atomic_load(&t->closed), 2);
  for (int i = 0; i < 2; i++)
    if (t->s[i]) CU_ASSERT_EQUAL(taxi_stream_unref(t->s[i]), 0);
}

/* Print what a stuck stream holds: the bytes it keeps queued say whether a
 * write was left unsent. */
static void report_stuck(const char *what, struct two *t, long done,
                         long total) {
  printf("(%s stuck at %ld of %ld bytes; queued %zu and %zu) ", what, done,
         total, taxi_stream_write_queued(t->s[0]),
         taxi_stream_write_queued(t->s[1]));
}

/* ---- a write from another stream's callback -------------------------------
 */

static void to_other(taxi_stream_t *s, int status, const void *data,
                     size_t len) {
  struct two *t = taxi_stream_data(s);
  if (status < 0) return;
  taxi_stream_t *to = s == t->s[0] ? t->s[1] : t->s[0];
  if (taxi_stream_write(to, data, len, NULL, NULL) < 0)
    atomic_fetch_add(&t->refused, 1);
}

static void ignore_read(taxi_stream_t *s, int status, const void *data,
                        size_t len) {
  (void)s;
  (void)status;
  (void)data;
  (void)len;
}

/* What the first client sends is written to the second's stream by the
 * first stream's read callback; the second client never sends, so only
 * the hand-off of that write can make the second stream send. */
static void test_write_from_other_stream(void) {
  st_io_t c;
  static struct two t;
  memset(&t, 0, sizeof t);
  t.read_fn[0] = to_other;
  t.read_fn[1] = ignore_read;
  if (st_io_create(&c) < 0) return;
  int fds[2];
  if (two_connect(&c, &t, fds) < 0) {
    st_io_destroy(&c);
    return;
  }
  const long total = util_test_small() ? 256 * 1024 : 2 * 1024 * 1024;
  long sent = 0, got = 0;
  unsigned char out[IN_FLIGHT], in[IN_FLIGHT];
  unsigned rnd = 1;
  int ok = 1;
  taxi_time_t progress = taxi_now();
  while (got < total && ok) {
    /* Small segments (TCP_NODELAY): several reads of the first stream,
     * each writing to the second, while the second flushes the last. */
    while (sent - got < IN_FLIGHT && sent < total) {
      rnd = rnd * 1103515245u + 12345u;
      size_t n = 1 + (rnd >> 8) % 1024;
      if ((long)n > IN_FLIGHT - (sent - got))
        n = (size_t)(IN_FLIGHT - (sent - got));
      if ((long)n > total - sent) n = (size_t)(total - sent);
      for (size_t i = 0; i < n; i++) out[i] = st_byte(1, (uint64_t)sent + i);
      ssize_t k = send(fds[0], out, n, MSG_NOSIGNAL);
      if (k <= 0) break;
      sent += k;
    }
    struct pollfd p = {fds[1], POLLIN, 0};
    poll(&p, 1, 50);
    ssize_t k = recv(fds[1], in, sizeof in, 0);
    if (k == 0) {
      printf("(end of stream after %ld bytes) ", got);
      ok = 0;
    }
    for (ssize_t i = 0; i < k; i++)
      if (in[i] != st_byte(1, (uint64_t)(got + i))) {
        printf("(byte %ld differs) ", (long)(got + i));
        ok = 0;
        break;
      }
    if (k > 0) {
      got += k;
      progress = taxi_now();
    } else if (util_elapsed_ms(progress) > STUCK_MS) {
      report_stuck("second stream", &t, got, total);
      ok = 0;
    }
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(got, total);
  CU_ASSERT_EQUAL(atomic_load(&t.refused), 0);
  two_finish(&c, &t, fds);
}

/* ---- a write from a thread that dispatches nothing ------------------------
 */

struct lockstep {
  taxi_stream_t *s;
  atomic_int accepted, closed, failed, released;
  atomic_long written, received;
  long total;
};

static void ls_closed(taxi_stream_t *s, int reason) {
  struct lockstep *z = taxi_stream_data(s);
  (void)reason;
  atomic_store(&z->closed, 1);
}

static void ls_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct lockstep *z = arg;
  (void)l;
  taxi_stream_set_data(s, z);
  taxi_stream_on_close(s, ls_closed);
  taxi_stream_ref(s);
  z->s = s;
  taxi_stream_read_start(s, ignore_read);
  atomic_store(&z->accepted, 1);
}

/* One write at a time, each once the client has everything before it: so
 * every write finds the stream idle and must be handed to a dispatcher. */
static void ls_writer(void *arg) {
  struct lockstep *z = arg;
  unsigned char buf[IN_FLIGHT];
  unsigned rnd = 12345;
  long at = 0;
  while (at < z->total) {
    taxi_time_t start = taxi_now();
    while (atomic_load(&z->received) < at) {
      if (util_elapsed_ms(start) > 2 * STUCK_MS) {
        atomic_store(&z->failed, 1);
        return;
      }
      sched_yield();
    }
    rnd = rnd * 1103515245u + 12345u;
    size_t n = 1 + (rnd >> 8) % IN_FLIGHT;
    if ((long)n > z->total - at) n = (size_t)(z->total - at);
    for (size_t i = 0; i < n; i++) buf[i] = st_byte(2, (uint64_t)at + i);
    if (atomic_load(&z->released)) return; /* the client gave up */
    int rc = taxi_stream_write(z->s, buf, n, NULL, NULL);
    if (rc < 0) {
      printf("(foreign write: %s) ", taxi_strerror(rc));
      atomic_store(&z->failed, 1);
      return;
    }
    at += (long)n;
    atomic_store(&z->written, at);
  }
}

static void test_write_from_foreign_thread(void) {
  st_io_t c;
  static struct lockstep z;
  memset(&z, 0, sizeof z);
  z.total = util_test_small() ? 256 * 1024 : 2 * 1024 * 1024;
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, ls_accept, &z, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_FATAL(util_wait_flag(&z.accepted, 1, 10000));
  util_set_nonblock(fd);
  util_thread_t th;
  CU_ASSERT_EQUAL_FATAL(util_thread_start(&th, ls_writer, &z), 0);
  unsigned char in[IN_FLIGHT];
  long got = 0;
  int ok = 1;
  taxi_time_t progress = taxi_now();
  while (got < z.total && ok && !atomic_load(&z.failed)) {
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 50);
    ssize_t k = recv(fd, in, sizeof in, 0);
    if (k == 0) ok = 0;
    for (ssize_t i = 0; i < k; i++)
      if (in[i] != st_byte(2, (uint64_t)(got + i))) {
        printf("(byte %ld differs) ", (long)(got + i));
        ok = 0;
        break;
      }
    if (k > 0) {
      got += k;
      atomic_store(&z.received, got);
      progress = taxi_now();
    } else if (util_elapsed_ms(progress) > STUCK_MS) {
      printf("(stuck at %ld of %ld bytes, %ld written; queued %zu) ", got,
             z.total, atomic_load(&z.written), taxi_stream_write_queued(z.s));
      ok = 0;
    }
  }
  atomic_store(&z.released, 1); /* let the writer go, whatever */
  atomic_store(&z.received, z.total);
  util_thread_join(&th, 30000, "foreign writer");
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(atomic_load(&z.failed), 0);
  CU_ASSERT_EQUAL(got, z.total);
  close(fd);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&z.closed), 1);
  CU_ASSERT_EQUAL(taxi_stream_unref(z.s), 0);
}

/* ---- a relay: reading stopped in its callback, started from another ------
 */

/* The write of what one stream read went out on the other: read again
 * from the first.  This runs as a callback of the other stream, so the
 * read_start is made by a thread that is not processing the first. */
static void relay_written(taxi_stream_t *to, int status, size_t bytes,
                          void *arg);

static void relay_read(taxi_stream_t *s, int status, const void *data,
                       size_t len) {
  struct two *t = taxi_stream_data(s);
  if (status < 0) return;
  int from = s == t->s[0] ? 0 : 1;
  taxi_stream_t *to = t->s[1 - from];
  /* Backpressure as a relay does it, at every read: stop reading here
   * until the other stream has sent what this read brought. */
  CU_ASSERT_EQUAL(taxi_stream_read_stop(s), 0);
  /* Counted first: the other stream may send the bytes, and its client
   * see them, before this callback returns. */
  atomic_fetch_add(&t->relayed[from], (long)len);
  if (taxi_stream_write(to, data, len, relay_written, s) < 0)
    atomic_fetch_add(&t->refused, 1);
}

static void relay_written(taxi_stream_t *to, int status, size_t bytes,
                          void *arg) {
  taxi_stream_t *from = arg;
  (void)to;
  (void)bytes;
  if (status == 0) (void)taxi_stream_read_start(from, relay_read);
}

/* Both clients send at once, each reading what the other sent: every
 * read stops its stream's reading, and the other stream's write
 * completion (queued from the first stream's callback: a foreign write)
 * starts it again. */
static void test_relay_restart_from_other_stream(void) {
  st_io_t c;
  static struct two t;
  memset(&t, 0, sizeof t);
  t.read_fn[0] = t.read_fn[1] = relay_read;
  if (st_io_create(&c) < 0) return;
  int fds[2];
  if (two_connect(&c, &t, fds) < 0) {
    st_io_destroy(&c);
    return;
  }
  const long total = util_test_small() ? 256 * 1024 : 1024 * 1024;
  long sent[2] = {0, 0}, got[2] = {0, 0};
  unsigned char out[IN_FLIGHT], in[IN_FLIGHT];
  int ok = 1;
  taxi_time_t progress = taxi_now();
  while ((got[0] < total || got[1] < total) && ok) {
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    for (int i = 0; i < 2; i++)
      if (sent[i] < total && sent[i] - got[1 - i] < IN_FLIGHT)
        p[i].events |= POLLOUT;
    poll(p, 2, 50);
    int moved = 0;
    for (int i = 0; i < 2; i++) {
      /* Client i sends stream `i` of bytes; client 1 - i receives it. */
      if ((p[i].revents & POLLOUT) && sent[i] - got[1 - i] < IN_FLIGHT) {
        size_t n = (size_t)(IN_FLIGHT - (sent[i] - got[1 - i]));
        if ((long)n > total - sent[i]) n = (size_t)(total - sent[i]);
        for (size_t k = 0; k < n; k++)
          out[k] = st_byte(10 + (unsigned)i, (uint64_t)sent[i] + k);
        ssize_t k = send(fds[i], out, n, MSG_NOSIGNAL);
        if (k > 0) sent[i] += k;
      }
      ssize_t k = recv(fds[i], in, sizeof in, 0);
      if (k == 0) {
        printf("(client %d: end of stream) ", i);
        ok = 0;
      }
      int from = 1 - i;
      for (ssize_t b = 0; b < k && ok; b++)
        if (in[b] != st_byte(10 + (unsigned)from, (uint64_t)(got[from] + b))) {
          printf("(client %d: byte %ld differs) ", i, (long)(got[from] + b));
          ok = 0;
        }
      if (k > 0) {
        got[from] += k;
        moved = 1;
      }
    }
    if (moved) {
      progress = taxi_now();
    } else if (util_elapsed_ms(progress) > STUCK_MS) {
      printf(
          "(relay stuck: %ld and %ld of %ld bytes arrived; queued %zu "
          "and %zu) ",
          got[0], got[1], total, taxi_stream_write_queued(t.s[0]),
          taxi_stream_write_queued(t.s[1]));
      ok = 0;
    }
  }
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(got[0], total);
  CU_ASSERT_EQUAL(got[1], total);
  CU_ASSERT_EQUAL(atomic_load(&t.relayed[0]), total);
  CU_ASSERT_EQUAL(atomic_load(&t.relayed[1]), total);
  CU_ASSERT_EQUAL(atomic_load(&t.refused), 0);
  two_finish(&c, &t, fds);
}

CU_TestInfo st_tests_cross[] = {
    {"a write from another stream's callback is flushed",
     test_write_from_other_stream},
    {"a write from a thread that dispatches nothing is flushed",
     test_write_from_foreign_thread},
    {"a relay: reading stopped in its callback, started from the other's",
     test_relay_restart_from_other_stream},
    CU_TEST_INFO_NULL,
};
