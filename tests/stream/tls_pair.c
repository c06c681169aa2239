/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/tls_pair.c - taxi against taxi over TLS, on the suite's
 * dispatcher x backend pair: many echoes (every byte checked, close_notify
 * both ways), write_ref and sendfile through the engine, and a slow
 * reader that keeps the writer's queue under its high watermark.
 */
#define _GNU_SOURCE 1

#include "tls_common.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- many echoes ----------------------------------------------------------
 */

static void test_echo_many(void) {
  st_io_t io;
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client("ca", NULL);
  tls_srv_t v;
  tls_srv_init(&v);
  int port = sc && cc ? tls_listen(&io, sc, &v, NULL) : -1;
  /* The listener and the streams hold their references. */
  taxi_tls_context_unref(sc);
  st_io_run(&io);
  size_t total = util_test_small() ? 100 : 1000, wave = 100;
  tls_cli_t *c = calloc(total, sizeof *c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  unsigned rnd = 12345;
  size_t ok = 0;
  for (size_t at = 0; port > 0 && at < total; at += wave) {
    size_t n = total - at < wave ? total - at : wave;
    for (size_t i = at; i < at + n; i++) {
      rnd = rnd * 1103515245u + 12345u;
      size_t len = 1 + (rnd >> 8) % 16384;
      CU_ASSERT_EQUAL(
          tls_cli_start(&c[i], &io, port, cc, NULL, len, 2048, (unsigned)i), 0);
    }
    CU_ASSERT(tls_cli_wait(c + at, n, 60000));
    for (size_t i = at; i < at + n; i++) {
      int good = c[i].reason == 0 && c[i].hs_status == 0 && !c[i].bad &&
                 c[i].got == c[i].total;
      if (!good)
        printf(
            "\n  stream %zu: reason %s, handshake %d, %zu of %zu, bad %d, "
            "\"%s\"",
            i, taxi_error_name(c[i].reason), c[i].hs_status, c[i].got,
            c[i].total, c[i].bad, c[i].why);
      ok += (size_t)good;
    }
  }
  CU_ASSERT_EQUAL(ok, total);
  CU_ASSERT_STRING_EQUAL(c[0].info.version, "TLSv1.3");
  CU_ASSERT_EQUAL(c[0].info.server, 0);
  /* Every server stream saw the client's close_notify as the end. */
  CU_ASSERT(tls_wait_count(&v.closed, (int)total, 20000));
  CU_ASSERT_EQUAL(atomic_load(&v.hs_ok), (int)total);
  CU_ASSERT_EQUAL(atomic_load(&v.eofs), (int)total);
  CU_ASSERT_EQUAL(atomic_load(&v.closed_ok), (int)total);
  st_io_destroy(&io);
  taxi_tls_context_unref(cc);
  free(c);
}

/* ---- write_ref and sendfile -----------------------------------------------
 */

#define REF_LEN 100000
#define FILE_LEN 300001
#define COPY_LEN 5000
#define FILES_TOTAL (REF_LEN + FILE_LEN + COPY_LEN)

typedef struct files {
  unsigned char ref[REF_LEN];
  int fd;
  atomic_int done_ok, done_bad;
} files_t;

static files_t *files;

static void files_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  (void)s;
  (void)arg;
  (void)bytes;
  atomic_fetch_add(status == 0 ? &files->done_ok : &files->done_bad, 1);
}

static void files_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  unsigned char copy[COPY_LEN];
  for (size_t i = 0; i < COPY_LEN; i++)
    copy[i] = st_byte(7, REF_LEN + FILE_LEN + i);
  /* Queued before the handshake: they wait for it, in order. */
  CU_ASSERT_EQUAL(
      taxi_stream_write_ref(s, files->ref, REF_LEN, files_done, NULL), 0);
  CU_ASSERT_EQUAL(
      taxi_stream_sendfile(s, files->fd, 0, FILE_LEN, files_done, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_write(s, copy, COPY_LEN, files_done, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_end(s), 0);
}

static void test_files(void) {
  st_io_t io;
  files = calloc(1, sizeof *files);
  CU_ASSERT_PTR_NOT_NULL_FATAL(files);
  for (size_t i = 0; i < REF_LEN; i++) files->ref[i] = st_byte(7, i);
  char path[] = "/tmp/taxi-tls-file-XXXXXX";
  files->fd = mkstemp(path);
  CU_ASSERT_FATAL(files->fd >= 0);
  unlink(path);
  unsigned char *buf = malloc(FILE_LEN);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  for (size_t i = 0; i < FILE_LEN; i++) buf[i] = st_byte(7, REF_LEN + i);
  CU_ASSERT_EQUAL(write(files->fd, buf, FILE_LEN), FILE_LEN);
  free(buf);
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client("ca", NULL);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.tls = sc;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&io, &lo, files_accept, NULL, NULL);
  st_io_run(&io);
  /* The client echoes nothing: it reads until the server's close_notify
   * and checks every byte (the echo's checker, told the total). */
  tls_cli_t c;
  CU_ASSERT_EQUAL(
      tls_cli_start(&c, &io, port, cc, "localhost", FILES_TOTAL, 0, 7), 0);
  CU_ASSERT(tls_cli_wait(&c, 1, 30000));
  CU_ASSERT_EQUAL(c.got, FILES_TOTAL);
  CU_ASSERT_EQUAL(c.bad, 0);
  CU_ASSERT_EQUAL(c.reason, 0);
  CU_ASSERT_EQUAL(atomic_load(&files->done_ok), 3);
  CU_ASSERT_EQUAL(atomic_load(&files->done_bad), 0);
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(cc);
  close(files->fd);
  free(files);
}

/* ---- a slow reader --------------------------------------------------------
 */

#define SLOW_TOTAL ((size_t)16 << 20)

typedef struct slow {
  taxi_stream_t *s;
  size_t queued; /* bytes written so far */
  atomic_int refused, max_queued, server_done;
  atomic_long high;
} slow_t;

static slow_t slow;

static void slow_fill(taxi_stream_t *s) {
  unsigned char buf[16384];
  while (slow.queued < SLOW_TOTAL) {
    size_t n = SLOW_TOTAL - slow.queued;
    if (n > sizeof buf) n = sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = st_byte(9, slow.queued + i);
    int rc = taxi_stream_write(s, buf, n, NULL, NULL);
    if (rc == TAXI_EAGAIN) {
      atomic_fetch_add(&slow.refused, 1);
      return;
    }
    if (rc < 0) {
      taxi_stream_close(s);
      return;
    }
    slow.queued += n;
    int q = (int)taxi_stream_write_queued(s);
    if (q > atomic_load(&slow.max_queued)) atomic_store(&slow.max_queued, q);
  }
  taxi_stream_end(s);
  atomic_store(&slow.server_done, 1);
}

static void slow_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  (void)arg;
  size_t low, high;
  taxi_stream_watermarks(s, &low, &high);
  atomic_store(&slow.high, (long)high);
  taxi_stream_on_drain(s, slow_fill);
  slow_fill(s);
}

static void test_slow_reader(void) {
  st_io_t io;
  memset(&slow, 0, sizeof slow);
  if (st_io_create(&io) < 0) return;
  taxi_tls_context_t *sc = tls_server("srv", NULL);
  taxi_tls_context_t *cc = tls_client("ca", NULL);
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT;
  so.tls = sc;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&io, &lo, slow_accept, NULL, NULL);
  st_io_run(&io);
  tls_cli_t c;
  CU_ASSERT_EQUAL(tls_cli_start_paused(&c, &io, port, cc, SLOW_TOTAL, 9), 0);
  /* The client does not read: the writer fills the socket, then its
   * queue to the high watermark, where writes are refused. */
  CU_ASSERT(tls_wait_count(&slow.refused, 1, 30000));
  CU_ASSERT_EQUAL(atomic_load(&slow.server_done), 0);
  CU_ASSERT_EQUAL(tls_cli_read(&c), 0);
  CU_ASSERT(tls_cli_wait(&c, 1, 60000));
  CU_ASSERT_EQUAL(c.got, SLOW_TOTAL);
  CU_ASSERT_EQUAL(c.bad, 0);
  CU_ASSERT_EQUAL(c.reason, 0);
  CU_ASSERT(atomic_load(&slow.refused) > 0);
  CU_ASSERT(atomic_load(&slow.max_queued) <= (int)atomic_load(&slow.high));
  st_io_destroy(&io);
  taxi_tls_context_unref(sc);
  taxi_tls_context_unref(cc);
}

CU_TestInfo tls_tests_pair[] = {
    {"echo: many streams, random segments, every byte", test_echo_many},
    {"write_ref, sendfile and write through the engine", test_files},
    {"a slow reader: the writer's queue stays under its watermark",
     test_slow_reader},
    CU_TEST_INFO_NULL};
