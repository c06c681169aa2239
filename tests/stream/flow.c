/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/flow.c - backpressure (a peer that stops reading), write
 * completion order across copying, zero-copy and file writes, half-close
 * both ways, reads into the caller's buffer, a file sent corked, and a
 * read the OS refuses until the proactor gives up on it.
 */
#define _GNU_SOURCE 1

#include "suites.h"
#include "fault/fault.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- backpressure: reading pauses ------------------------------------------
 */

static void test_backpressure_pauses_reading(void) {
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.read_buffer = 4096;
  so.high_watermark = 16384;
  so.low_watermark = 4096;
  so.flags = TAXI_STREAM_PAUSE_READING;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, st_echo_accept, &e, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  util_set_nonblock(fd);
  /* Send without reading until the server has paused reading and nothing
   * more goes for 300 ms: its output buffer is full, it stopped reading,
   * the kernel buffers filled.  (The pause is waited for, not assumed
   * after some time: a loaded machine may run the server late.) */
  static unsigned char buf[65536];
  uint64_t sent = 0;
  taxi_io_stats_t st;
  taxi_time_t idle_since = taxi_now(), began = taxi_now();
  for (;;) {
    taxi_io_stats(c.io, &st);
    if (st.read_pauses >= 1 && util_elapsed_ms(idle_since) >= 300) break;
    if (sent >= (64u << 20) || util_elapsed_ms(began) >= 30000) break;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = st_byte(7, sent + i);
    ssize_t k = send(fd, buf, sizeof buf, MSG_NOSIGNAL);
    if (k > 0) {
      sent += (uint64_t)k;
      idle_since = taxi_now();
    } else {
      util_sleep_ms(5);
    }
  }
  taxi_io_stats(c.io, &st);
  CU_ASSERT(st.read_pauses >= 1);
  CU_ASSERT(atomic_load(&e.max_queued) <= so.high_watermark);
  /* The server holds no more than its buffers: what it read is what it
   * could queue, not what the peer sent. */
  CU_ASSERT(st.bytes_in < sent);
  CU_ASSERT(st.bytes_in - st.bytes_out <= (uint64_t)so.high_watermark);
  /* Now read everything back, every byte checked. */
  uint64_t got = 0;
  int bad = 0;
  shutdown(fd, SHUT_WR);
  taxi_time_t start = taxi_now();
  while (got < sent && util_elapsed_ms(start) < 30000) {
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    if (k == 0) break;
    if (k < 0) {
      if (errno == EAGAIN) util_sleep_ms(1);
      continue;
    }
    for (ssize_t i = 0; i < k; i++)
      if (buf[i] != st_byte(7, got + (uint64_t)i)) bad++;
    got += (uint64_t)k;
  }
  if (got != sent)
    printf("(echoed %llu of %llu bytes) ", (unsigned long long)got,
           (unsigned long long)sent);
  CU_ASSERT_EQUAL(got, sent);
  CU_ASSERT_EQUAL(bad, 0);
  close(fd);
  st_io_destroy(&c);
}

/* ---- backpressure: writes refused, drain ------------------------------------
 */

struct producer {
  taxi_stream_t *s;
  size_t total, queued;
  atomic_int refused, drains, done;
};

static void produce(struct producer *p) {
  unsigned char chunk[1000];
  while (p->queued < p->total) {
    size_t n = p->total - p->queued < sizeof chunk ? p->total - p->queued
                                                   : sizeof chunk;
    for (size_t i = 0; i < n; i++) chunk[i] = st_byte(3, p->queued + i);
    int rc = taxi_stream_write(p->s, chunk, n, NULL, NULL);
    if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) { /* room, records */
      atomic_fetch_add(&p->refused, 1);
      return; /* the drain callback comes back */
    }
    CU_ASSERT_EQUAL(rc, 0);
    if (rc < 0) return;
    p->queued += n;
  }
  taxi_stream_shutdown(p->s);
  atomic_store(&p->done, 1);
}

static void on_drain(taxi_stream_t *s) {
  struct producer *p = taxi_stream_data(s);
  atomic_fetch_add(&p->drains, 1);
  produce(p);
}

static void producer_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct producer *p = arg;
  (void)l;
  p->s = s;
  taxi_stream_set_data(s, p);
  taxi_stream_on_drain(s, on_drain);
  produce(p);
}

static void test_backpressure_refuses_writes(void) {
  st_io_t c;
  struct producer p;
  memset(&p, 0, sizeof p);
  p.total = 16u << 20;
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.high_watermark = 8192;
  so.low_watermark = 2048;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, producer_accept, &p, NULL);
  st_io_run(&c);
  /* A small receive window, so the kernel cannot take it all either. */
  int fd = st_connect_rcvbuf(port, 8192);
  CU_ASSERT_FATAL(fd >= 0);
  /* Not reading: the server must hold back, its writes refused. */
  CU_ASSERT(util_wait_flag(&p.refused, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&p.done), 0);
  unsigned char *all = malloc(p.total + 1);
  long n = all ? st_recv_to_eof(fd, all, p.total + 1) : -1;
  CU_ASSERT_EQUAL(n, (long)p.total);
  int bad = 0;
  for (long i = 0; i < n; i++)
    if (all[i] != st_byte(3, (uint64_t)i)) bad++;
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(atomic_load(&p.drains) >= 1);
  CU_ASSERT_EQUAL(atomic_load(&p.done), 1);
  taxi_io_stats_t st;
  taxi_io_stats(c.io, &st);
  CU_ASSERT(st.writes_refused >= 1);
  free(all);
  close(fd);
  st_io_destroy(&c);
}

/* ---- write completion order -----------------------------------------------
 */

#define ORDER_N 300

struct order {
  atomic_int next, wrong, bad_status;
  int file;
  unsigned char ref[ORDER_N][16];
  size_t expect_len;
  unsigned char expect[ORDER_N * 64];
};

static void order_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct order *o = taxi_stream_data(s);
  int i = (int)(intptr_t)arg;
  (void)bytes;
  if (status != 0) atomic_fetch_add(&o->bad_status, 1);
  if (atomic_fetch_add(&o->next, 1) != i) atomic_fetch_add(&o->wrong, 1);
  if (i == ORDER_N - 1) taxi_stream_shutdown(s);
}

static void order_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct order *o = arg;
  (void)l;
  taxi_stream_set_data(s, o);
  size_t at = 0;
  for (int i = 0; i < ORDER_N; i++) {
    int rc;
    void *tag = (void *)(intptr_t)i;
    if (i % 3 == 0) {
      char text[32];
      int n = snprintf(text, sizeof text, "copy %d;", i);
      rc = taxi_stream_write(s, text, (size_t)n, order_done, tag);
      memcpy(o->expect + at, text, (size_t)n);
      at += (size_t)n;
    } else if (i % 3 == 1) {
      int n = snprintf((char *)o->ref[i], sizeof o->ref[i], "ref %d;", i);
      rc = taxi_stream_write_ref(s, o->ref[i], (size_t)n, order_done, tag);
      memcpy(o->expect + at, o->ref[i], (size_t)n);
      at += (size_t)n;
    } else {
      /* Bytes i .. i+9 of the file. */
      rc = taxi_stream_sendfile(s, o->file, i, 10, order_done, tag);
      if (pread(o->file, o->expect + at, 10, i) != 10) CU_FAIL("pread");
      at += 10;
    }
    CU_ASSERT_EQUAL(rc, 0);
  }
  o->expect_len = at;
}

/* A file with len bytes of data, already unlinked (mkstemp's template):
 * its descriptor. */
static int temp_file(const void *data, size_t len) {
  char path[] = "/tmp/taxi-stream-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  unlink(path);
  CU_ASSERT_EQUAL(write(fd, data, len), (ssize_t)len);
  return fd;
}

static void test_write_completion_order(void) {
  st_io_t c;
  static struct order o;
  memset(&o, 0, sizeof o);
  unsigned char content[ORDER_N + 16];
  for (size_t i = 0; i < sizeof content; i++)
    content[i] = (unsigned char)('A' + i % 26);
  o.file = temp_file(content, sizeof content);
  if (st_io_create(&c) < 0) return;
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.max_writes = ORDER_N;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, order_accept, &o, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  static unsigned char got[ORDER_N * 64];
  long n = st_recv_to_eof(fd, got, sizeof got);
  /* Every callback ran (and so the accept callback, which wrote what is
   * expected, happened before this thread reads it). */
  CU_ASSERT(util_wait_flag(&o.next, ORDER_N, 10000));
  CU_ASSERT_EQUAL(n, (long)o.expect_len);
  CU_ASSERT(n > 0 && memcmp(got, o.expect, (size_t)n) == 0);
  CU_ASSERT_EQUAL(atomic_load(&o.next), ORDER_N);
  CU_ASSERT_EQUAL(atomic_load(&o.wrong), 0);
  CU_ASSERT_EQUAL(atomic_load(&o.bad_status), 0);
  close(fd);
  st_io_destroy(&c);
  close(o.file);
}

/* ---- half-close ------------------------------------------------------------
 */

struct half {
  int shut_first; /* the stream half-closed before the peer did */
  atomic_int eof, got_more;
  char seen[64];
  size_t seen_len;
};

static void half_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  struct half *h = taxi_stream_data(s);
  if (status == TAXI_EEOF && h->shut_first) {
    /* Our side is shut already: writing is refused, not a crash. */
    CU_ASSERT_EQUAL(taxi_stream_write(s, "x", 1, NULL, NULL), TAXI_EPIPE);
    atomic_store(&h->eof, 1);
    return;
  }
  if (status == TAXI_EEOF) {
    /* The peer is done sending: answer, then shut our side too. */
    CU_ASSERT_EQUAL(taxi_stream_write(s, "bye", 3, NULL, NULL), 0);
    CU_ASSERT_EQUAL(taxi_stream_shutdown(s), 0);
    CU_ASSERT_EQUAL(taxi_stream_write(s, "x", 1, NULL, NULL), TAXI_EPIPE);
    atomic_store(&h->eof, 1);
    return;
  }
  if (h->seen_len + len <= sizeof h->seen) {
    memcpy(h->seen + h->seen_len, data, len);
    h->seen_len += len;
  }
  if (memchr(data, '!', len)) atomic_store(&h->got_more, 1);
  taxi_stream_write(s, data, len, NULL, NULL);
}

static void half_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_read_start(s, half_read);
}

/* The peer half-closes first: the stream reads EOF, still writes, then
 * half-closes its own side. */
static void test_half_close_by_peer(void) {
  st_io_t c;
  static struct half h;
  memset(&h, 0, sizeof h);
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, half_accept, &h, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_send_all(fd, "hello", 5), 0);
  shutdown(fd, SHUT_WR);
  char buf[64];
  long n = st_recv_to_eof(fd, buf, sizeof buf);
  CU_ASSERT_EQUAL(n, 8);
  CU_ASSERT(n == 8 && memcmp(buf, "hellobye", 8) == 0);
  CU_ASSERT_EQUAL(atomic_load(&h.eof), 1);
  close(fd);
  st_io_destroy(&c);
}

static void shut_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_write(s, "data", 4, NULL, NULL);
  taxi_stream_shutdown(s);
  taxi_stream_read_start(s, half_read);
}

/* The stream half-closes first: the peer reads EOF, and what the peer
 * sends afterwards still arrives. */
static void test_half_close_by_stream(void) {
  st_io_t c;
  static struct half h;
  memset(&h, 0, sizeof h);
  h.shut_first = 1;
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, shut_accept, &h, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  char buf[64];
  long n = st_recv_to_eof(fd, buf, sizeof buf);
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT(n == 4 && memcmp(buf, "data", 4) == 0);
  CU_ASSERT_EQUAL(net_send_all(fd, "more!", 5), 0);
  CU_ASSERT(util_wait_flag(&h.got_more, 1, 10000));
  CU_ASSERT(h.seen_len == 5 && memcmp(h.seen, "more!", 5) == 0);
  close(fd);
  CU_ASSERT(util_wait_flag(&h.eof, 1, 10000));
  st_io_destroy(&c);
}

/* ---- reads into the caller's buffer ----------------------------------------
 */

struct into {
  char exact[10], some[100];
  atomic_int step;
  int status[3];
  size_t bytes[3];
};

static void into_done(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct into *t = arg;
  int k = atomic_load(&t->step);
  t->status[k] = status;
  t->bytes[k] = bytes;
  int rc = 0;
  if (k == 0)
    rc = taxi_stream_read_into(s, t->some, sizeof t->some, 0, into_done, t);
  else if (k == 1)
    rc = taxi_stream_read_into(s, t->exact, sizeof t->exact,
                               TAXI_STREAM_READ_EXACT, into_done, t);
  CU_ASSERT_EQUAL(rc, 0);
  atomic_store(&t->step, k + 1);
}

static void into_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct into *t = arg;
  (void)l;
  CU_ASSERT_EQUAL(taxi_stream_read_into(s, t->exact, sizeof t->exact,
                                        TAXI_STREAM_READ_EXACT, into_done, t),
                  0);
  /* One read at a time, and not both kinds. */
  CU_ASSERT_EQUAL(taxi_stream_read_into(s, t->some, 1, 0, into_done, t),
                  TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, (taxi_stream_read_fn)NULL),
                  TAXI_EINVAL);
}

static void test_read_into(void) {
  st_io_t c;
  static struct into t;
  memset(&t, 0, sizeof t);
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, into_accept, &t, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  /* Ten bytes in three pieces: one completion, with all ten. */
  net_send_all(fd, "012", 3);
  util_sleep_ms(20);
  net_send_all(fd, "3456", 4);
  util_sleep_ms(20);
  CU_ASSERT_EQUAL(atomic_load(&t.step), 0);
  net_send_all(fd, "789", 3);
  CU_ASSERT(util_wait_flag(&t.step, 1, 10000));
  CU_ASSERT_EQUAL(t.status[0], 0);
  CU_ASSERT_EQUAL(t.bytes[0], 10);
  CU_ASSERT(memcmp(t.exact, "0123456789", 10) == 0);
  /* Some bytes: completes with what came. */
  net_send_all(fd, "abcde", 5);
  CU_ASSERT(util_wait_flag(&t.step, 2, 10000));
  CU_ASSERT_EQUAL(t.status[1], 0);
  CU_ASSERT(t.bytes[1] >= 1 && t.bytes[1] <= 5);
  /* The end of the stream cuts an exact read short. */
  close(fd);
  CU_ASSERT(util_wait_flag(&t.step, 3, 10000));
  CU_ASSERT_EQUAL(t.status[2], TAXI_EEOF);
  st_io_destroy(&c);
}

/* ---- a file goes out corked -----------------------------------------------
 */

#define CORK_FILE (256 * 1024)

struct cork {
  int file;
  atomic_int step;
  atomic_int in_send; /* TCP_CORK as the file's write completed */
  atomic_int after;   /* TCP_CORK as the peer's byte came, later */
};

static int cork_state(taxi_stream_t *s) {
#if defined(TCP_CORK)
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt((int)taxi_stream_handle(s), IPPROTO_TCP, TCP_CORK, &v, &len) !=
      0)
    return -1;
  return v;
#else
  (void)s;
  return 0;
#endif
}

static void cork_file_done(taxi_stream_t *s, int status, size_t bytes,
                           void *arg) {
  struct cork *k = arg;
  (void)bytes;
  atomic_store(&k->in_send, status == 0 ? cork_state(s) : -2);
  atomic_fetch_add(&k->step, 1);
}

static void cork_read(taxi_stream_t *s, int status, const void *data,
                      size_t len) {
  struct cork *k = taxi_stream_data(s);
  (void)data;
  (void)len;
  if (status < 0 || atomic_load(&k->step) != 1) return;
  atomic_store(&k->after, cork_state(s));
  atomic_fetch_add(&k->step, 1);
  taxi_stream_read_stop(s);
  taxi_stream_end(s);
}

static void cork_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct cork *k = arg;
  (void)l;
  taxi_stream_set_data(s, k);
  CU_ASSERT_EQUAL(taxi_stream_write(s, "head\n", 5, NULL, NULL), 0);
  CU_ASSERT_EQUAL(
      taxi_stream_sendfile(s, k->file, 0, CORK_FILE, cork_file_done, k), 0);
  CU_ASSERT_EQUAL(taxi_stream_read_start(s, cork_read), 0);
}

/* A head and a file queued together go out corked where the dispatcher's
 * sends return at once (full segments), and the socket is uncorked once
 * the file is sent: a later read finds it so (a stream left corked would
 * hold the tail of every response for the kernel's 200 ms). */
static void test_file_corked(void) {
  st_io_t c;
  static struct cork k;
  static unsigned char content[CORK_FILE], got[5 + CORK_FILE];
  memset(&k, 0, sizeof k);
  for (size_t i = 0; i < sizeof content; i++) content[i] = st_byte(7, i);
  k.file = temp_file(content, sizeof content);
  if (st_io_create(&c) < 0) {
    close(k.file);
    return;
  }
  int port = st_listen(&c, NULL, cork_accept, &k, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_recv_all(fd, got, sizeof got), 0);
  CU_ASSERT(memcmp(got, "head\n", 5) == 0 &&
            memcmp(got + 5, content, CORK_FILE) == 0);
  CU_ASSERT(util_wait_flag(&k.step, 1, 10000));
  CU_ASSERT_EQUAL(net_send_all(fd, "k", 1), 0);
  CU_ASSERT(util_wait_flag(&k.step, 2, 10000));
#if defined(TCP_CORK)
  CU_ASSERT_EQUAL(
      atomic_load(&k.in_send),
      st_dispatcher == TAXI_IO_PROACTOR || st_dispatcher == TAXI_IO_PROACTORS
          ? 0
          : 1);
#endif
  CU_ASSERT_EQUAL(atomic_load(&k.after), 0);
  close(fd);
  st_io_destroy(&c);
  close(k.file);
}

/* ---- a read refused for too long -------------------------------------------
 */

static int refused_past_give_up(void *arg) {
  (void)arg;
  /* The aio backend pauses 16 times between refusals (core/common/backoff.h),
   * about 2.3 s in all; the 17th refusal completes the read with
   * TAXI_EAGAIN.  More than that: the stream read again after it. */
  return fault_injected("aio_read") >= 20;
}

/* The aio backend's reads refused by the C library (aio_read failing with
 * EAGAIN, injected) until the proactor gives up and completes the read
 * with TAXI_EAGAIN: not a failure of the stream, which reads again rather
 * than wait for good for a completion that cannot come, and echoes once
 * the refusals stop.  Only the aio backend reads through aio_read. */
static void test_read_refused_until_given_up(void) {
  if (!fault_available()) {
    printf("(skipped: %s) ", fault_unavailable_reason());
    return;
  }
  st_io_t c;
  st_echo_t e;
  memset(&e, 0, sizeof e);
  if (st_io_create(&c) < 0) return;
  if (strncmp(taxi_io_backend(c.io), "aio", 3) != 0) { /* "aio:epoll" */
    printf("(skipped: only the aio backend reads with aio_read) ");
    taxi_io_destroy(c.io);
    return;
  }
  int port = st_listen(&c, NULL, st_echo_accept, &e, NULL);
  st_io_run(&c);
  CU_ASSERT_EQUAL(fault_arm("aio_read:1:EAGAIN:0"), 0);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_send_all(fd, "ping", 4), 0);
  CU_ASSERT(st_wait(refused_past_give_up, NULL, 20000));
  fault_arm("");
  char buf[4];
  CU_ASSERT_EQUAL(net_recv_all(fd, buf, 4), 0);
  CU_ASSERT(memcmp(buf, "ping", 4) == 0);
  CU_ASSERT_EQUAL(atomic_load(&e.write_errors), 0);
  close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_flow[] = {
    {"backpressure: reading pauses at the high watermark",
     test_backpressure_pauses_reading},
    {"backpressure: writes refused, drain at the low watermark",
     test_backpressure_refuses_writes},
    {"write completion order (copy, zero-copy, file)",
     test_write_completion_order},
    {"half-close by the peer", test_half_close_by_peer},
    {"half-close by the stream", test_half_close_by_stream},
    {"read into the caller's buffer (some, exact, EOF)", test_read_into},
    {"a file goes out corked, the socket uncorked after", test_file_corked},
    {"a read refused until the proactor gives up is made again",
     test_read_refused_until_given_up},
    CU_TEST_INFO_NULL,
};
