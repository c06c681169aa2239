/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/closing.c - a close counts what went out: a stream closed
 * by another thread while its writes are queued, in flight or completed
 * but not yet taken must count exactly the bytes its peer receives
 * (taxi_io_stats bytes_out), tell success only to writes whose bytes all
 * went out, and tell every write exactly once, before the close callback;
 * a stream made by taxi_stream_open is not closed (and freed) by a
 * timeout before its callbacks are set; taxi_stream_end delivers every
 * byte and then the end of the stream, even when the application holds a
 * duplicate of the handle.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

enum { CW_PIECES = 4, CW_PIECE = 256 * 1024, CW_ROUNDS = 24 };

struct cw {
  unsigned char *data; /* CW_PIECES * CW_PIECE bytes, the pattern */
  _Atomic(taxi_stream_t *) s;
  atomic_int told, told_ok, told_after_close, closed;
  atomic_bool small; /* this round's connection has small socket buffers */
  atomic_llong ok_bytes;
};

static void cw_written(taxi_stream_t *s, int status, size_t len, void *arg) {
  struct cw *c = arg;
  (void)s;
  if (atomic_load(&c->closed)) atomic_fetch_add(&c->told_after_close, 1);
  atomic_fetch_add(&c->told, 1);
  if (status == 0) {
    atomic_fetch_add(&c->told_ok, 1);
    atomic_fetch_add(&c->ok_bytes, (long long)len);
  }
}

static void cw_on_close(taxi_stream_t *s, int reason) {
  struct cw *c = taxi_stream_data(s);
  (void)reason;
  atomic_store(&c->closed, 1);
}

static void cw_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct cw *c = arg;
  (void)l;
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, cw_on_close);
  /* Small socket buffers on every other connection (the peer's receive
   * buffer too): most of the bytes cannot leave before the close, and a
   * write is in flight when it comes. */
  if (atomic_load(&c->small)) {
    int size = 4096;
    setsockopt((int)taxi_stream_handle(s), SOL_SOCKET, SO_SNDBUF, &size,
               sizeof size);
  }
  for (int i = 0; i < CW_PIECES; i++)
    CU_ASSERT_EQUAL(taxi_stream_write_ref(s, c->data + (size_t)i * CW_PIECE,
                                          CW_PIECE, cw_written, c),
                    0);
  /* Kept for the test thread, which closes it. */
  CU_ASSERT_EQUAL(taxi_stream_ref(s), 0);
  atomic_store(&c->s, s);
}

static int cw_published(void *arg) {
  struct cw *c = arg;
  return atomic_load(&c->s) != NULL;
}

static int cw_closed(void *arg) {
  struct cw *c = arg;
  return atomic_load(&c->closed);
}

static void test_close_counts(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  struct cw c;
  memset(&c, 0, sizeof c);
  size_t total = (size_t)CW_PIECES * CW_PIECE;
  c.data = malloc(total);
  unsigned char *got = malloc(total + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c.data);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  for (size_t i = 0; i < total; i++) c.data[i] = st_byte(7, i);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = total;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&io, &lo, cw_accept, &c, NULL);
  st_io_run(&io);
  long long received = 0, told_ok_bytes = 0;
  int partial = 0;
  for (int round = 0; round < CW_ROUNDS; round++) {
    atomic_store(&c.s, NULL);
    atomic_store(&c.closed, 0);
    atomic_store(&c.told, 0);
    atomic_store(&c.told_ok, 0);
    atomic_store(&c.told_after_close, 0);
    atomic_store(&c.ok_bytes, 0);
    atomic_store(&c.small, round % 2 == 1);
    int fd = st_connect_rcvbuf(port, round % 2 ? 4096 : 0);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(st_wait(cw_published, &c, 10000));
    /* Close at different moments of the transfer: at once, or after the
     * first writes have had time to go out (or not). */
    if (round % 3) util_sleep_ms(round % 3);
    taxi_stream_t *s = atomic_load(&c.s);
    taxi_stream_close(s);
    long n = st_recv_to_eof(fd, got, total + 1);
    close(fd);
    CU_ASSERT(n >= 0 && (size_t)n <= total);
    if (n > 0) CU_ASSERT_EQUAL(memcmp(got, c.data, (size_t)n), 0);
    CU_ASSERT(st_wait(cw_closed, &c, 10000));
    CU_ASSERT_EQUAL(taxi_stream_unref(s), 0);
    /* Each write told once, before the close callback; success only for
     * bytes the peer has. */
    CU_ASSERT_EQUAL(atomic_load(&c.told), CW_PIECES);
    CU_ASSERT_EQUAL(atomic_load(&c.told_after_close), 0);
    CU_ASSERT(atomic_load(&c.ok_bytes) <= (long long)n);
    if (n > 0 && n < (long)total) partial++;
    received += n > 0 ? n : 0;
    told_ok_bytes += atomic_load(&c.ok_bytes);
  }
  /* Every byte the peers received was counted as written, no more. */
  taxi_io_stats_t st;
  CU_ASSERT_EQUAL(taxi_io_stats(io.io, &st), 0);
  CU_ASSERT_EQUAL(st.bytes_out, (uint64_t)received);
  printf("(%lld bytes received, %lld told written, %d partial) ", received,
         told_ok_bytes, partial);
  st_io_destroy(&io);
  free(c.data);
  free(got);
}

/* ---- an opened stream waits for its callbacks ----------------------------
 */

static atomic_int op_closes, op_reason;

static void op_on_close(taxi_stream_t *s, int reason) {
  (void)s;
  atomic_store(&op_reason, reason);
  atomic_fetch_add(&op_closes, 1);
}

static void op_on_read(taxi_stream_t *s, int status, const void *data,
                       size_t len) {
  (void)s;
  (void)status;
  (void)data;
  (void)len;
}

static int op_closed(void *arg) {
  (void)arg;
  return atomic_load(&op_closes) > 0;
}

/* An idle timeout far shorter than the set-up takes: the stream must not
 * close (and be freed) before its callbacks are set, and then closes,
 * once, telling the close callback why. */
static void test_open_waits(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  st_io_run(&io);
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(util_socketpair(sv), 0);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.idle_timeout = 1; /* 1 ns */
  taxi_stream_t *s = NULL;
  atomic_store(&op_closes, 0);
  CU_ASSERT_EQUAL_FATAL(taxi_stream_open(&s, io.io, sv[0], &so), 0);
  util_sleep_ms(50); /* the dispatcher has had every chance to run it */
  CU_ASSERT_EQUAL(atomic_load(&op_closes), 0);
  CU_ASSERT_EQUAL(taxi_stream_on_close(s, op_on_close), 0);
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, op_on_read), 0);
  CU_ASSERT(st_wait(op_closed, NULL, 10000));
  CU_ASSERT_EQUAL(atomic_load(&op_reason), TAXI_ETIMEDOUT);
  util_sleep_ms(10);
  CU_ASSERT_EQUAL(atomic_load(&op_closes), 1);
  close(sv[1]);
  st_io_destroy(&io);
}

/* ---- taxi_stream_end: the bytes, then the end ----------------------------
 */

enum { END_BYTES = 1 << 20 };

struct ender {
  unsigned char *data;
  atomic_bool dup_it; /* this round: take the handle and duplicate it */
  atomic_int dup_fd, closes, reason;
};

static void end_on_close(taxi_stream_t *s, int reason) {
  struct ender *e = taxi_stream_data(s);
  atomic_store(&e->reason, reason);
  atomic_fetch_add(&e->closes, 1);
}

static void end_written(taxi_stream_t *s, int status, size_t len, void *arg) {
  (void)s;
  (void)arg;
  CU_ASSERT_EQUAL(status, 0);
  CU_ASSERT_EQUAL(len, END_BYTES);
}

static void end_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct ender *e = arg;
  (void)l;
  taxi_stream_set_data(s, e);
  taxi_stream_on_close(s, end_on_close);
  /* A duplicate keeps the socket open past the stream's close: only the
   * shutdown tells the peer the stream ended. */
  if (atomic_load(&e->dup_it))
    atomic_store(&e->dup_fd, dup((int)taxi_stream_handle(s)));
  CU_ASSERT_EQUAL(
      taxi_stream_write_ref(s, e->data, END_BYTES, end_written, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_end(s), 0);
}

static int end_closed(void *arg) {
  struct ender *e = arg;
  return atomic_load(&e->closes) > 0;
}

static void test_end_delivers(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  struct ender e;
  memset(&e, 0, sizeof e);
  e.data = malloc(END_BYTES);
  unsigned char *got = malloc(END_BYTES + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e.data);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  for (size_t i = 0; i < END_BYTES; i++) e.data[i] = st_byte(11, i);
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = END_BYTES;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&io, &lo, end_accept, &e, NULL);
  st_io_run(&io);
  for (int round = 0; round < 4; round++) {
    atomic_store(&e.dup_it, round % 2 == 1);
    atomic_store(&e.dup_fd, -1);
    atomic_store(&e.closes, 0);
    atomic_store(&e.reason, -1);
    int fd = st_connect_rcvbuf(port, round < 2 ? 4096 : 0);
    CU_ASSERT_FATAL(fd >= 0);
    /* Bounded by the socket's receive timeout (st_connect_rcvbuf). */
    long n = st_recv_to_eof(fd, got, END_BYTES + 1);
    CU_ASSERT_EQUAL(n, END_BYTES);
    if (n == END_BYTES) CU_ASSERT_EQUAL(memcmp(got, e.data, END_BYTES), 0);
    CU_ASSERT(st_wait(end_closed, &e, 10000));
    CU_ASSERT_EQUAL(atomic_load(&e.reason), 0);
    int dfd = atomic_load(&e.dup_fd);
    if (round % 2 == 1) CU_ASSERT(dfd >= 0);
    if (dfd >= 0) close(dfd);
    close(fd);
  }
  st_io_destroy(&io);
  free(e.data);
  free(got);
}

CU_TestInfo st_tests_closing[] = {
    {"an opened stream waits for its callbacks before any timeout",
     test_open_waits},
    {"a close counts exactly what went out; each write told once",
     test_close_counts},
    {"taxi_stream_end: every byte, then the end, a duplicate held or not",
     test_end_delivers},
    CU_TEST_INFO_NULL,
};
