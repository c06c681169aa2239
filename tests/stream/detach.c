/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/detach.c - taxi_stream_detach: a connection leaves its
 * stream and is served on by another context - of the pair under test, or
 * of the other model (a Proactor for a reactive pair, a Reactor for a
 * proactive one) - and back, with every byte accounted for, also bytes
 * that arrive while it moves; and what detach refuses.
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A context of the other model than the pair under test, run by a thread
 * of the test. */
static int other_io_create(st_io_t *c) {
  memset(c, 0, sizeof *c);
  taxi_io_options_t o;
  taxi_io_options_init(&o);
  o.dispatcher =
      st_dispatcher == TAXI_IO_PROACTOR ? TAXI_IO_REACTOR : TAXI_IO_PROACTOR;
  o.threads = o.dispatcher == TAXI_IO_PROACTOR ? 2 : 1;
  int rc = taxi_io_create(&c->io, &o);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) {
    printf("taxi_io_create (other model): %s\n", taxi_strerror(rc));
    c->io = NULL;
    return -1;
  }
  return 0;
}

/* ---- ping-pong across contexts ------------------------------------------ */

#define MOVE_MSG 3000 /* bytes per message: more than one read at times */
#define MOVE_ROUNDS 24

/* One connection's session: it outlives the streams that serve it. */
struct mover {
  taxi_io_t *ios[3]; /* where the connection goes, in turn */
  unsigned char buf[MOVE_MSG];
  size_t have;
  atomic_int moves, closes, detach_errors, open_errors;
  atomic_int done; /* the last stream closed */
};

static void mv_read(taxi_stream_t *s, int status, const void *d, size_t n);

static void mv_closed(taxi_stream_t *s, int reason) {
  struct mover *m = taxi_stream_data(s);
  (void)reason;
  atomic_fetch_add(&m->closes, 1);
  atomic_store(&m->done, 1);
}

/* Serve the connection in its next context, with what was read already. */
static void mv_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                        size_t len, void *arg) {
  struct mover *m = arg;
  (void)s;
  if (len > 0 && m->have + len <= sizeof m->buf) {
    memcpy(m->buf + m->have, unread, len);
    m->have += len;
  }
  /* Moves happen one at a time (the test waits for each). */
  int k = atomic_load(&m->moves) + 1;
  taxi_stream_t *next;
  if (taxi_stream_open(&next, m->ios[k % 3], h, NULL) < 0) {
    atomic_fetch_add(&m->open_errors, 1);
    close(h);
    atomic_store(&m->done, 1);
  } else {
    taxi_stream_set_data(next, m);
    taxi_stream_on_close(next, mv_closed);
    taxi_stream_read_start(next, mv_read);
  }
  /* Counted last: the test reads open_errors once the move is counted. */
  atomic_fetch_add(&m->moves, 1);
}

/* The echo of a whole message was sent: the queue is empty, move. */
static void mv_echoed(taxi_stream_t *s, int status, size_t b, void *arg) {
  struct mover *m = arg;
  (void)b;
  if (status != 0) return;
  if (taxi_stream_detach(s, mv_detached, m) != 0)
    atomic_fetch_add(&m->detach_errors, 1);
}

static void mv_read(taxi_stream_t *s, int status, const void *d, size_t n) {
  struct mover *m = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_close(s);
    return;
  }
  size_t take = n < sizeof m->buf - m->have ? n : sizeof m->buf - m->have;
  memcpy(m->buf + m->have, d, take);
  m->have += take;
  if (m->have < sizeof m->buf) return;
  m->have = 0;
  taxi_stream_write_ref(s, m->buf, sizeof m->buf, mv_echoed, m);
}

static void mv_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_on_close(s, mv_closed);
  taxi_stream_read_start(s, mv_read);
}

/* Each message goes to the next context: the pair's, a second of the
 * pair's kind, one of the other model, and round again. */
static void test_moves_between_contexts(void) {
  st_io_t a, b, o;
  if (st_io_create(&a) < 0) return;
  if (st_io_create(&b) < 0 || other_io_create(&o) < 0) {
    if (b.io) st_io_destroy(&b);
    st_io_destroy(&a);
    return;
  }
  struct mover *m = calloc(1, sizeof *m);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  m->ios[0] = a.io;
  m->ios[1] = b.io;
  m->ios[2] = o.io;
  int port = st_listen(&a, NULL, mv_accept, m, NULL);
  st_io_run(&a);
  st_io_run(&b);
  st_io_run(&o);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  unsigned char out[MOVE_MSG], in[MOVE_MSG];
  int round;
  for (round = 0; round < MOVE_ROUNDS; round++) {
    for (size_t i = 0; i < sizeof out; i++)
      out[i] = st_byte((unsigned)round + 7, i);
    if (net_send_all(fd, out, sizeof out) < 0 ||
        net_recv_all(fd, in, sizeof in) < 0)
      break;
    if (memcmp(in, out, sizeof in) != 0) {
      printf("(round %d: the echo differs) ", round);
      break;
    }
    /* The move is over once the next stream exists. */
    if (!util_wait_flag(&m->moves, round + 1, 10000)) {
      printf("(round %d: no move) ", round);
      break;
    }
  }
  CU_ASSERT_EQUAL(round, MOVE_ROUNDS);
  CU_ASSERT_EQUAL(atomic_load(&m->detach_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&m->open_errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&m->moves), MOVE_ROUNDS);
  /* The client's close ends the last stream, in whichever context. */
  close(fd);
  CU_ASSERT(util_wait_flag(&m->done, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&m->closes), 1);
  st_io_destroy(&o);
  st_io_destroy(&b);
  st_io_destroy(&a);
  free(m);
}

/* ---- bytes arriving while the connection moves -------------------------- */

#define FLOW_TOTAL (256 * 1024)

struct flow {
  taxi_io_t *to;
  taxi_stream_t *first; /* the stream the connection leaves */
  int outside;          /* detach from the test's thread, not a callback */
  atomic_int started;
  unsigned char *got;
  size_t have;
  size_t unread; /* bytes handed over by the detach */
  atomic_int moved, complete, detach_rc;
};

static void fl_written(taxi_stream_t *s, int status, size_t b, void *arg) {
  (void)b;
  (void)arg;
  if (status == 0) taxi_stream_end(s);
}

static void fl_read_after(taxi_stream_t *s, int status, const void *d,
                          size_t n) {
  struct flow *f = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_close(s);
    return;
  }
  if (f->have + n > FLOW_TOTAL) n = FLOW_TOTAL - f->have; /* never: counted */
  memcpy(f->got + f->have, d, n);
  f->have += n;
  if (f->have == FLOW_TOTAL) {
    atomic_store(&f->complete, 1);
    taxi_stream_write_ref(s, f->got, FLOW_TOTAL, fl_written, f);
  }
}

static void fl_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                        size_t len, void *arg) {
  struct flow *f = arg;
  (void)s;
  /* First: once the stream below is open, the other context may serve the
   * whole exchange before this thread goes on. */
  atomic_store(&f->moved, 1);
  if (f->have + len <= FLOW_TOTAL) {
    memcpy(f->got + f->have, unread, len);
    f->have += len;
    f->unread = len;
  }
  taxi_stream_t *next;
  if (taxi_stream_open(&next, f->to, h, NULL) == 0) {
    taxi_stream_set_data(next, f);
    /* A read that goes on by itself (io_uring's multishot receive) may
     * have taken every byte before the move: then they all came here, and
     * go back at once.  Either call is the last use of next: once it
     * runs, the other context may end and release it. */
    if (f->have == FLOW_TOTAL) {
      atomic_store(&f->complete, 1);
      taxi_stream_write_ref(next, f->got, FLOW_TOTAL, fl_written, f);
    } else {
      taxi_stream_read_start(next, fl_read_after);
    }
  } else {
    close(h);
  }
}

/* The first bytes: leave at once, while the client goes on sending. */
static void fl_read_first(taxi_stream_t *s, int status, const void *d,
                          size_t n) {
  struct flow *f = taxi_stream_data(s);
  if (status < 0) {
    taxi_stream_close(s);
    return;
  }
  memcpy(f->got + f->have, d, n);
  f->have += n;
  if (f->outside)
    atomic_store(&f->started, 1);
  else
    atomic_store(&f->detach_rc, taxi_stream_detach(s, fl_detached, f) + 1000);
}

static void fl_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct flow *f = arg;
  (void)l;
  f->first = s;
  taxi_stream_ref(s); /* for a detach from the test's thread */
  taxi_stream_set_data(s, arg);
  taxi_stream_read_start(s, fl_read_first);
}

/* From a read callback no read of the stream is in flight; from another
 * thread one usually is (a Proactor's), and what it brings is handed over
 * with the handle. */
static void bytes_in_flight(int outside) {
  st_io_t a, o;
  if (st_io_create(&a) < 0) return;
  if (other_io_create(&o) < 0) {
    st_io_destroy(&a);
    return;
  }
  struct flow *f = calloc(1, sizeof *f);
  unsigned char *out = malloc(FLOW_TOTAL), *back = malloc(FLOW_TOTAL);
  CU_ASSERT_FATAL(f && out && back);
  f->got = malloc(FLOW_TOTAL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f->got);
  f->to = o.io;
  f->outside = outside;
  for (size_t i = 0; i < FLOW_TOTAL; i++) out[i] = st_byte(99, i);
  int port = st_listen(&a, NULL, fl_accept, f, NULL);
  st_io_run(&a);
  st_io_run(&o);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  /* In small pieces, so that the move happens in the middle. */
  int sent_ok = 0;
  for (size_t at = 0; at < FLOW_TOTAL; at += 512) {
    if (net_send_all(fd, out + at, 512) < 0) break;
    if (at == FLOW_TOTAL - 512) sent_ok = 1;
    if (outside && at == 64 * 1024) {
      CU_ASSERT(util_wait_flag(&f->started, 1, 10000));
      atomic_store(&f->detach_rc,
                   taxi_stream_detach(f->first, fl_detached, f) + 1000);
    }
  }
  CU_ASSERT(sent_ok);
  long got = st_recv_to_eof(fd, back, FLOW_TOTAL);
  CU_ASSERT_EQUAL(atomic_load(&f->detach_rc), 1000);
  CU_ASSERT_EQUAL(atomic_load(&f->moved), 1);
  CU_ASSERT_EQUAL(got, FLOW_TOTAL);
  CU_ASSERT(got == FLOW_TOTAL && memcmp(back, out, FLOW_TOTAL) == 0);
  close(fd);
  st_io_destroy(&o);
  st_io_destroy(&a);
  if (f->first) taxi_stream_unref(f->first);
  free(f->got);
  free(f);
  free(out);
  free(back);
}

static void test_bytes_in_flight(void) { bytes_in_flight(0); }
static void test_bytes_in_flight_outside(void) { bytes_in_flight(1); }

/* ---- what detach refuses, and what it promises --------------------------- */

struct refuse {
  atomic_int accepted, detached, closes;
  int rc_null_s, rc_null_fn, rc_busy, rc_again, rc_close, rc_write;
  taxi_handle_t handle;
  size_t unread;
};

static void rf_closed(taxi_stream_t *s, int reason) {
  struct refuse *r = taxi_stream_data(s);
  (void)reason;
  atomic_fetch_add(&r->closes, 1);
}

static void rf_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                        size_t len, void *arg) {
  struct refuse *r = arg;
  (void)s;
  (void)unread;
  r->handle = h;
  r->unread = len;
  atomic_fetch_add(&r->detached, 1);
}

static void rf_done(taxi_stream_t *s, int status, size_t b, void *a) {
  (void)s;
  (void)status;
  (void)b;
  (void)a;
}

/* Nothing of s runs before the accept callback returns: the queued write
 * is certainly still queued. */
static void rf_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct refuse *r = arg;
  static const char hello[] = "queued";
  (void)l;
  taxi_stream_set_data(s, r);
  taxi_stream_on_close(s, rf_closed);
  if (atomic_fetch_add(&r->accepted, 1) == 0) {
    r->rc_null_s = taxi_stream_detach(NULL, rf_detached, r);
    r->rc_null_fn = taxi_stream_detach(s, NULL, r);
    taxi_stream_write(s, hello, sizeof hello, rf_done, NULL);
    r->rc_busy = taxi_stream_detach(s, rf_detached, r);
    taxi_stream_close(s);
    return;
  }
  CU_ASSERT_EQUAL(taxi_stream_detach(s, rf_detached, r), 0);
  r->rc_again = taxi_stream_detach(s, rf_detached, r);
  r->rc_close = taxi_stream_close(s);
  r->rc_write = taxi_stream_write(s, hello, sizeof hello, NULL, NULL);
}

static void test_refusals_and_promises(void) {
  st_io_t a;
  if (st_io_create(&a) < 0) return;
  struct refuse r;
  memset(&r, 0, sizeof r);
  r.handle = TAXI_INVALID_HANDLE;
  int port = st_listen(&a, NULL, rf_accept, &r, NULL);
  st_io_run(&a);
  int busy = st_connect(port);
  CU_ASSERT_FATAL(busy >= 0);
  CU_ASSERT(util_wait_flag(&r.closes, 1, 10000));
  CU_ASSERT_EQUAL(r.rc_null_s, TAXI_EINVAL);
  CU_ASSERT_EQUAL(r.rc_null_fn, TAXI_EINVAL);
  CU_ASSERT_EQUAL(r.rc_busy, TAXI_EBUSY);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT(util_wait_flag(&r.detached, 1, 10000));
  CU_ASSERT_EQUAL(r.rc_again, TAXI_EBADF);
  CU_ASSERT_EQUAL(r.rc_close, TAXI_EBADF);
  CU_ASSERT_EQUAL(r.rc_write, TAXI_EBADF);
  CU_ASSERT_EQUAL(r.unread, 0);
  /* The handle is open and still the connection: a byte sent on it
   * arrives. */
  CU_ASSERT_FATAL(r.handle != TAXI_INVALID_HANDLE);
  CU_ASSERT_EQUAL(send(r.handle, "z", 1, MSG_NOSIGNAL), 1);
  char c = 0;
  CU_ASSERT_EQUAL(net_recv_all(fd, &c, 1), 0);
  CU_ASSERT_EQUAL(c, 'z');
  /* Destroying the context leaves it open too: it is the test's. */
  st_io_destroy(&a);
  CU_ASSERT_EQUAL(fcntl(r.handle, F_GETFD) >= 0, 1);
  CU_ASSERT_EQUAL(atomic_load(&r.detached), 1);
  CU_ASSERT_EQUAL(atomic_load(&r.closes), 1); /* the first stream's only */
  close(r.handle);
  close(fd);
  close(busy);
}

/* A detach that the context's destruction overtakes still hands over. */
struct racer {
  atomic_int detached;
  taxi_handle_t handle;
};

static void rc_detached(taxi_stream_t *s, taxi_handle_t h, const void *unread,
                        size_t len, void *arg) {
  struct racer *r = arg;
  (void)s;
  (void)unread;
  (void)len;
  r->handle = h;
  atomic_fetch_add(&r->detached, 1);
}

static void rc_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  (void)l;
  taxi_stream_set_data(s, arg);
  taxi_stream_detach(s, rc_detached, arg);
}

static void test_detach_then_destroy(void) {
  for (int i = 0; i < 20; i++) {
    st_io_t a;
    if (st_io_create(&a) < 0) return;
    struct racer r = {.handle = TAXI_INVALID_HANDLE};
    atomic_init(&r.detached, 0);
    int port = st_listen(&a, NULL, rc_accept, &r, NULL);
    st_io_run(&a);
    int fd = st_connect(port);
    CU_ASSERT_FATAL(fd >= 0);
    /* Destroy as soon as the connection is accepted, or a little later. */
    if (i % 2) util_sleep_ms(1);
    st_io_destroy(&a);
    /* Accepted (then handed over once) or never accepted. */
    int n = atomic_load(&r.detached);
    CU_ASSERT(n == 0 || n == 1);
    if (n == 1) {
      CU_ASSERT(fcntl(r.handle, F_GETFD) >= 0);
      close(r.handle);
    }
    close(fd);
  }
}

CU_TestInfo st_tests_detach[] = {
    {"detach: a connection moves between contexts, every byte echoed",
     test_moves_between_contexts},
    {"detach: bytes arriving during the move are neither lost nor doubled",
     test_bytes_in_flight},
    {"detach: from another thread, a read in flight hands its bytes over",
     test_bytes_in_flight_outside},
    {"detach: refusals (EINVAL, EBUSY, EBADF), the handle left open",
     test_refusals_and_promises},
    {"detach: the context destroyed at once still hands over",
     test_detach_then_destroy},
    CU_TEST_INFO_NULL};
