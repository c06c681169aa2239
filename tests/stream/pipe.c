/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/pipe.c - taxi_stream_pipe: two accepted streams relayed
 * both ways by two pipes, as a proxy does.  Backpressure (a peer that does
 * not read stops the reading of the other stream, with the bytes held in
 * the process bounded by the watermarks), half-close passed on, every
 * byte in order; an error or a close on one closing the other; the
 * application's own writes beside a pipe; the refusals.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Two accepted streams, in the order their clients connected, relayed by
 * two pipes: 0 -> 1 and 1 -> 0. */
struct relay {
  _Atomic(taxi_stream_t *) s[2];
  atomic_int accepted, closed, reason[2], dones, done_calls;
  atomic_int status[2];     /* of pipe 0 -> 1 and 1 -> 0; 1: not over */
  bool end_when_done;       /* both pipes over with 0: end both streams */
  taxi_stream_options_t so; /* of the accepted streams: the defaults */
};

static void rl_closed(taxi_stream_t *s, int reason) {
  struct relay *r = taxi_stream_data(s);
  atomic_store(&r->reason[s == atomic_load(&r->s[0]) ? 0 : 1], reason);
  atomic_fetch_add(&r->closed, 1);
}

static void rl_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct relay *r = arg;
  (void)l;
  int i = atomic_load(&r->accepted);
  taxi_stream_set_data(s, r);
  taxi_stream_on_close(s, rl_closed);
  taxi_stream_ref(s); /* the test reads it after its close */
  atomic_store(&r->s[i], s);
  atomic_store(&r->accepted, i + 1);
}

static void rl_done(taxi_stream_t *from, taxi_stream_t *to, int status,
                    void *arg) {
  struct relay *r = arg;
  atomic_store(&r->status[from == atomic_load(&r->s[0]) ? 0 : 1], status);
  atomic_fetch_add(&r->done_calls, 1);
  if (status == 0 && atomic_fetch_add(&r->dones, 1) == 1 && r->end_when_done) {
    /* Both ends passed on: nothing more can come either way. */
    taxi_stream_end(from);
    taxi_stream_end(to);
  }
}

/* Clear r, listen with the default stream options for the accepted
 * streams, connect two clients (fds, non-blocking; the first with rcvbuf0
 * if not 0), and pipe both ways. */
static int rl_setup(st_io_t *c, struct relay *r, bool end_when_done, int fds[2],
                    int rcvbuf0) {
  memset(r, 0, sizeof *r);
  r->end_when_done = end_when_done;
  taxi_stream_options_init(&r->so); /* 32 KB ring, low 8 KB, 8 KB reads */
  for (int i = 0; i < 2; i++) atomic_store(&r->status[i], 1);
  if (st_io_create(c) < 0) return -1;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &r->so;
  int port = st_listen(c, &lo, rl_accept, r, NULL);
  if (port < 0) return -1;
  st_io_run(c);
  for (int i = 0; i < 2; i++) {
    fds[i] = st_connect_rcvbuf(port, i == 0 ? rcvbuf0 : 0);
    CU_ASSERT_FATAL(fds[i] >= 0);
    CU_ASSERT_FATAL(util_wait_flag(&r->accepted, i + 1, 10000));
    util_set_nonblock(fds[i]);
  }
  taxi_stream_t *a = atomic_load(&r->s[0]), *b = atomic_load(&r->s[1]);
  CU_ASSERT_EQUAL(taxi_stream_pipe(a, b, rl_done, r), 0);
  CU_ASSERT_EQUAL(taxi_stream_pipe(b, a, rl_done, r), 0);
  return 0;
}

static void rl_finish(st_io_t *c, struct relay *r, int fds[2]) {
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0) close(fds[i]);
  st_io_destroy(c);
  CU_ASSERT_EQUAL(atomic_load(&r->closed), 2);
  CU_ASSERT_EQUAL(atomic_load(&r->done_calls), 2); /* each pipe once */
  for (int i = 0; i < 2; i++) {
    taxi_stream_t *s = atomic_load(&r->s[i]);
    if (s) CU_ASSERT_EQUAL(taxi_stream_unref(s), 0);
  }
}

static uint64_t pauses_of(taxi_stream_t *s) {
  taxi_stream_counters_t n;
  return taxi_stream_counters(s, &n) == 0 ? n.read_pauses : 0;
}

/* Read whatever fd has, checking it continues the sequence `seed` at
 * *got; 1 at the end of the stream, 0 for more to come, -1 on an error
 * or a wrong byte. */
static int read_check(int fd, unsigned seed, uint64_t *got) {
  unsigned char buf[16384];
  ssize_t k = recv(fd, buf, sizeof buf, 0);
  if (k == 0) return 1;
  if (k < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  for (ssize_t i = 0; i < k; i++)
    if (buf[i] != st_byte(seed, *got + (uint64_t)i)) {
      printf("(byte %llu differs) ", (unsigned long long)(*got + i));
      return -1;
    }
  *got += (uint64_t)k;
  return 0;
}

/* Send the next bytes of sequence `seed` from *sent (at most max). */
static void send_some(int fd, unsigned seed, uint64_t *sent, uint64_t max) {
  unsigned char buf[16384];
  size_t n = sizeof buf;
  if (max - *sent < n) n = (size_t)(max - *sent);
  for (size_t i = 0; i < n; i++) buf[i] = st_byte(seed, *sent + i);
  ssize_t k = n ? send(fd, buf, n, MSG_NOSIGNAL) : 0;
  if (k > 0) *sent += (uint64_t)k;
}

/* ---- backpressure, half-close, every byte -----------------------------------
 */

/* Client 2 sends, and client 1 (a small receive buffer) reads nothing,
 * until the pipe from b into a has stopped reading b for lack of room in
 * a: the bytes held in the process are then within a's high watermark and
 * one read buffer.  Then client 2 shuts its sending down, and client 1
 * reads everything while it sends a smaller load the other way and shuts
 * down in turn: each end is passed on, each client reads every byte, then
 * the end of the stream, and both streams are ended. */
static void test_pipe_backpressure_half_close(void) {
  static struct relay r;
  st_io_t c;
  int fds[2];
  if (rl_setup(&c, &r, true, fds, 4096) < 0) return;
  taxi_stream_t *a = atomic_load(&r.s[0]), *b = atomic_load(&r.s[1]);
  const uint64_t cap = (uint64_t)256 << 20, back = 300000;
  uint64_t sent[2] = {0, 0}, got[2] = {0, 0};
  taxi_time_t start = taxi_now();
  /* Client 2 sends (into b, relayed to a and client 1, which does not
   * read) until b's reading has paused. */
  while (pauses_of(b) == 0 && sent[1] < cap && util_elapsed_ms(start) < 20000) {
    struct pollfd p = {fds[1], POLLOUT, 0};
    if (poll(&p, 1, 10) == 1) send_some(fds[1], 21, &sent[1], cap);
  }
  CU_ASSERT(pauses_of(b) >= 1);
  /* The bytes held in the process for that direction: read from b, not
   * yet sent by a (b's counter read first: the difference can only be
   * less than the truth). */
  taxi_stream_counters_t nb, na;
  taxi_stream_counters(b, &nb);
  taxi_stream_counters(a, &na);
  size_t low, high;
  taxi_stream_watermarks(a, &low, &high);
  uint64_t held = nb.bytes_in - na.bytes_out;
  if (held > high + 8192)
    printf("(held %llu, above %zu + 8192) ", (unsigned long long)held, high);
  CU_ASSERT(held <= high + 8192);
  shutdown(fds[1], SHUT_WR);
  /* Now client 1 reads all that, while it sends `back` bytes to client
   * 2, who reads them. */
  int eof[2] = {0, 0}, bad = 0;
  while (!(eof[0] && eof[1]) && !bad && util_elapsed_ms(start) < 60000) {
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (sent[0] < back) p[0].events |= POLLOUT;
    if (poll(p, 2, 100) < 0) break;
    if (p[0].revents & POLLOUT) {
      send_some(fds[0], 12, &sent[0], back);
      if (sent[0] == back) shutdown(fds[0], SHUT_WR);
    }
    for (int i = 0; i < 2; i++) {
      if (eof[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int rc = read_check(fds[i], i == 0 ? 21 : 12, &got[i]);
      if (rc < 0) bad = 1;
      if (rc == 1) eof[i] = 1;
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(eof[0] && eof[1]); /* each end passed on */
  CU_ASSERT_EQUAL(got[0], sent[1]);
  CU_ASSERT_EQUAL(got[1], sent[0]);
  CU_ASSERT_EQUAL(sent[0], back);
  CU_ASSERT(util_wait_flag(&r.closed, 2, 10000));
  CU_ASSERT_EQUAL(atomic_load(&r.status[0]), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.status[1]), 0);
  CU_ASSERT_EQUAL(atomic_load(&r.reason[0]), 0); /* ended, both */
  CU_ASSERT_EQUAL(atomic_load(&r.reason[1]), 0);
  taxi_stream_counters(a, &na);
  taxi_stream_counters(b, &nb);
  CU_ASSERT_EQUAL(na.bytes_in, back);
  CU_ASSERT_EQUAL(nb.bytes_out, back);
  CU_ASSERT_EQUAL(nb.bytes_in, sent[1]);
  CU_ASSERT_EQUAL(na.bytes_out, sent[1]);
  rl_finish(&c, &r, fds);
}

/* ---- an end of one stream closes the other -------------------------------
 */

/* One row a way for one stream to end. */
typedef struct end_case {
  /* Client 2 resets its connection: b fails (on the relayed writes, or
   * its reading), the pipes end with that error, and a is closed.  Else
   * the application closes a: the pipes end with TAXI_ECANCELED, and b is
   * closed, its client seeing the end. */
  bool reset;
} end_case_t;

static const end_case_t end_cases[] = {{true}, {false}};

static void end_closes_other(const end_case_t *k) {
  static struct relay r;
  st_io_t c;
  int fds[2];
  if (rl_setup(&c, &r, false, fds, 0) < 0) return;
  int e; /* what the pipes end with */
  if (k->reset) {
    struct linger lg = {1, 0};
    setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fds[1]); /* a reset */
    fds[1] = -1;
    uint64_t sent = 0;
    taxi_time_t start = taxi_now();
    while (atomic_load(&r.closed) < 2 && util_elapsed_ms(start) < 10000) {
      struct pollfd p = {fds[0], POLLOUT, 0};
      if (poll(&p, 1, 10) == 1) send_some(fds[0], 3, &sent, (uint64_t)1 << 30);
    }
    CU_ASSERT_EQUAL(atomic_load(&r.closed), 2);
    e = atomic_load(&r.reason[1]);
    CU_ASSERT(e == TAXI_ECONNRESET || e == TAXI_EPIPE);
    CU_ASSERT_EQUAL(atomic_load(&r.reason[0]), TAXI_ECANCELED); /* closed */
    if (e != TAXI_ECONNRESET && e != TAXI_EPIPE)
      printf("(closed with %s) ", taxi_error_name(e));
  } else {
    e = TAXI_ECANCELED;
    CU_ASSERT_EQUAL(taxi_stream_close(atomic_load(&r.s[0])), 0);
    CU_ASSERT(util_wait_flag(&r.closed, 2, 10000));
    CU_ASSERT_EQUAL(atomic_load(&r.reason[0]), 0);
    CU_ASSERT_EQUAL(atomic_load(&r.reason[1]), TAXI_ECANCELED);
  }
  CU_ASSERT_EQUAL(atomic_load(&r.status[0]), e);
  /* After a reset, the pipe reading b ends with b's error; or with 0 when
   * b read the end of the stream first (the system reports a reset once,
   * to whichever call comes first, and a read after it finds the end: with
   * a read and a write in flight at once, a Proactor's, the write may take
   * the reset and the read the end, which the pipe passes on before b's
   * close); or with TAXI_ECANCELED when a, its `to`, was closed by the
   * other pipe's end before b's close reached this one: taxi_stream_pipe
   * ends a pipe with the reason of whichever of its streams closed first. */
  int s1 = atomic_load(&r.status[1]);
  if (k->reset) {
    CU_ASSERT(s1 == e || s1 == 0 || s1 == TAXI_ECANCELED);
    if (s1 != e) printf("(the pipe from b: %s) ", taxi_error_name(s1));
  } else {
    CU_ASSERT_EQUAL(s1, e);
  }
  if (!k->reset) {
    char buf[16];
    util_set_nonblock(fds[1]);
    struct pollfd p = {fds[1], POLLIN, 0};
    CU_ASSERT_EQUAL(poll(&p, 1, 10000), 1);
    CU_ASSERT_EQUAL(recv(fds[1], buf, sizeof buf, 0), 0);
  }
  rl_finish(&c, &r, fds);
}

static void test_pipe_error_closes_other(void) {
  end_closes_other(&end_cases[0]);
}

static void test_pipe_close_closes_other(void) {
  end_closes_other(&end_cases[1]);
}

/* ---- the application's writes beside a pipe ---------------------------------
 */

#define APP_BYTE 0xFF
/* The relayed sequence never holds APP_BYTE. */
static unsigned char relayed_byte(uint64_t i) {
  return (unsigned char)(i % 251);
}

struct app_writer {
  taxi_stream_t *to;
  atomic_int stop;
  long written, refused;
};

static void app_writer_main(void *arg) {
  struct app_writer *w = arg;
  unsigned char chunk[1000];
  memset(chunk, APP_BYTE, sizeof chunk);
  while (!atomic_load(&w->stop) && w->written < 400 * (long)sizeof chunk) {
    int rc = taxi_stream_write(w->to, chunk, sizeof chunk, NULL, NULL);
    if (rc == 0)
      w->written += (long)sizeof chunk;
    else if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS)
      w->refused++, sched_yield();
    else
      break;
  }
}

/* Client 1 sends 2 MB through a -> b while a thread writes its own bytes
 * to b: b's peer gets both, the relayed ones in order and none lost (a
 * relayed read b refused went back to a's buffer). */
static void test_pipe_beside_app_writes(void) {
  static struct relay r;
  st_io_t c;
  int fds[2];
  if (rl_setup(&c, &r, false, fds, 0) < 0) return;
  static struct app_writer w;
  memset(&w, 0, sizeof w);
  w.to = atomic_load(&r.s[1]);
  util_thread_t th;
  CU_ASSERT_EQUAL(util_thread_start(&th, app_writer_main, &w), 0);
  const uint64_t total = util_test_small() ? 512 * 1024 : 2 * 1024 * 1024;
  uint64_t sent = 0, got = 0, app = 0;
  unsigned char buf[16384];
  int bad = 0;
  taxi_time_t start = taxi_now();
  while (got < total && !bad && util_elapsed_ms(start) < 30000) {
    struct pollfd p[2] = {{fds[0], sent < total ? POLLOUT : 0, 0},
                          {fds[1], POLLIN, 0}};
    if (poll(p, 2, 100) < 0) break;
    if (p[0].revents & POLLOUT) {
      size_t n = sizeof buf;
      if (total - sent < n) n = (size_t)(total - sent);
      for (size_t i = 0; i < n; i++) buf[i] = relayed_byte(sent + i);
      ssize_t k = send(fds[0], buf, n, MSG_NOSIGNAL);
      if (k > 0) sent += (uint64_t)k;
    }
    if (p[1].revents & POLLIN) {
      ssize_t k = recv(fds[1], buf, sizeof buf, 0);
      if (k <= 0) break;
      for (ssize_t i = 0; i < k; i++) {
        if (buf[i] == APP_BYTE) {
          app++;
        } else if (buf[i] != relayed_byte(got++)) {
          printf("(relayed byte %llu differs) ", (unsigned long long)got - 1);
          bad = 1;
          break;
        }
      }
    }
  }
  atomic_store(&w.stop, 1);
  util_thread_join(&th, 10000, "application writer");
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(got, total);
  /* The rest of the application's bytes. */
  while (app < (uint64_t)w.written && util_elapsed_ms(start) < 40000) {
    struct pollfd p = {fds[1], POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    ssize_t k = recv(fds[1], buf, sizeof buf, 0);
    if (k <= 0) break;
    for (ssize_t i = 0; i < k; i++) app += buf[i] == APP_BYTE;
  }
  CU_ASSERT_EQUAL(app, (uint64_t)w.written);
  rl_finish(&c, &r, fds);
}

/* ---- refusals
 * -----------------------------------------------------------------
 */

struct refused_pipe {
  atomic_int calls, status;
};

static void rp_done(taxi_stream_t *from, taxi_stream_t *to, int status,
                    void *arg) {
  struct refused_pipe *p = arg;
  (void)from;
  (void)to;
  atomic_store(&p->status, status);
  atomic_fetch_add(&p->calls, 1);
}

static void rp_detached(taxi_stream_t *s, taxi_handle_t h, const void *u,
                        size_t n, void *arg) {
  (void)s, (void)h, (void)u, (void)n, (void)arg;
}

static void rp_read(taxi_stream_t *s, int st, const void *d, size_t n) {
  (void)s, (void)st, (void)d, (void)n;
}

static void rp_into(taxi_stream_t *s, int st, size_t n, void *arg) {
  (void)s, (void)st, (void)n, (void)arg;
}

/* Streams of socket pairs' ends in a context nothing dispatches. */
static void test_pipe_refusals(void) {
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int sv[5][2];
  taxi_stream_t *s[5];
  taxi_stream_options_t small;
  taxi_stream_options_init(&small);
  small.high_watermark = 8192;
  small.low_watermark = 4096; /* 4096 of room after a drain, reads of 8192 */
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_FATAL(util_socketpair(sv[i]) == 0);
    CU_ASSERT_FATAL(
        taxi_stream_open(&s[i], c.io, sv[i][0], i == 4 ? &small : NULL) == 0);
    taxi_stream_ref(s[i]);
  }
  static struct refused_pipe p;
  memset(&p, 0, sizeof p);
  CU_ASSERT_EQUAL(taxi_stream_pipe(NULL, s[1], NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[0], NULL, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[0], s[0], NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[0], s[4], NULL, NULL), TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "taxi_stream_pipe") != NULL);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[0], s[1], rp_done, &p), 0);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[0], s[2], NULL, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[2], s[1], NULL, NULL), TAXI_EBUSY);
  /* The pipe reads s[0]; neither may leave. */
  CU_ASSERT_EQUAL(taxi_stream_read_start(s[0], rp_read), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_stream_read_stop(s[0]), TAXI_EBUSY);
  char buf[4];
  CU_ASSERT_EQUAL(taxi_stream_read_into(s[0], buf, 4, 0, rp_into, NULL),
                  TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_stream_detach(s[0], rp_detached, NULL), TAXI_EBUSY);
  CU_ASSERT_EQUAL(taxi_stream_detach(s[1], rp_detached, NULL), TAXI_EBUSY);
  /* The other way round is another pipe. */
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[1], s[0], NULL, NULL), 0);
  CU_ASSERT_EQUAL(taxi_stream_shutdown(s[3]), 0);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[2], s[3], NULL, NULL), TAXI_EPIPE);
  CU_ASSERT_EQUAL(taxi_stream_close(s[3]), 0);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[2], s[3], NULL, NULL), TAXI_EBADF);
  CU_ASSERT_EQUAL(taxi_stream_pipe(s[3], s[2], NULL, NULL), TAXI_EBADF);
  CU_ASSERT_EQUAL(atomic_load(&p.calls), 0);
  /* The destroy closes them: the pipe ends once, cancelled. */
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&p.calls), 1);
  CU_ASSERT_EQUAL(atomic_load(&p.status), TAXI_ECANCELED);
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(taxi_stream_unref(s[i]), 0);
    close(sv[i][1]);
  }
}

CU_TestInfo st_tests_pipe[] = {
    {"pipes both ways: backpressure bounded, half-close, every byte",
     test_pipe_backpressure_half_close},
    {"pipes: a reset of one stream closes the other",
     test_pipe_error_closes_other},
    {"pipes: a close of one stream closes the other",
     test_pipe_close_closes_other},
    {"a pipe beside the application's writes: nothing lost, in order",
     test_pipe_beside_app_writes},
    {"taxi_stream_pipe refusals", test_pipe_refusals},
    CU_TEST_INFO_NULL,
};
