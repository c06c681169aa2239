/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/stream/post.c - functions posted to streams, listeners and the
 * context run in their object's context: never beside another of its
 * callbacks (a per-object "inside" flag set with atomic_exchange catches
 * two at once), never inside the call that posted them, each exactly
 * once, with TAXI_ECANCELED when the object closes first; and the
 * refusals (NULL, closed, stopped).
 */
#define _GNU_SOURCE 1

#include "suites.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define POSTERS 8
#define STREAMS 100
/* Bytes a client keeps unechoed at most: with one write record per read
 * and a record for every 8th, the records a stream needs stay far below
 * its max_writes (see ps_read). */
#define IN_FLIGHT 2048

/* ---- 8 threads post to 100 streams that echo -------------------------------
 */

struct post_test;

struct pstream {
  struct post_test *t;
  taxi_stream_t *s;
  int index;
  unsigned reads;
  atomic_int inside;
};

/* One post of a posting thread: which stream, and how often it ran. */
struct post_rec {
  struct post_test *t;
  int stream;
  atomic_int ran;
};

struct post_test {
  struct pstream ps[STREAMS];
  atomic_int accepted, closed;
  atomic_int overlaps; /* a callback found another one inside */
  atomic_int bad;      /* a post ran with a status other than 0, or on
                          another stream */
  atomic_int refused;  /* a write or a post refused */
  atomic_long posts_ran;
  atomic_int posters_done;
  /* Posts made by the streams' read callbacks, to another stream. */
  atomic_long cb_posted, cb_ran;
  struct post_rec *recs; /* POSTERS x per_thread */
  int per_thread;
};

static void enter(struct pstream *ps) {
  if (atomic_exchange(&ps->inside, 1)) atomic_fetch_add(&ps->t->overlaps, 1);
}

static void leave(struct pstream *ps) { atomic_store(&ps->inside, 0); }

static void ps_written(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct pstream *ps = arg;
  (void)s;
  (void)status;
  (void)bytes;
  enter(ps);
  leave(ps);
}

static void cb_post_ran(taxi_stream_t *s, int status, void *arg) {
  struct pstream *ps = arg;
  enter(ps);
  if (status != 0 || s != ps->s) atomic_fetch_add(&ps->t->bad, 1);
  atomic_fetch_add(&ps->t->cb_ran, 1);
  leave(ps);
}

static void ps_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct pstream *ps = taxi_stream_data(s);
  struct post_test *t = ps->t;
  enter(ps);
  if (status == 0) {
    bool told = ps->reads++ % 8 == 0;
    /* Posting from a callback: to another stream, and to this one (which
     * must not run it inside this callback: the flag would say so).
     * Before the echo, so that a client that has its echo back knows the
     * post was counted.  (Every stream was accepted before any byte
     * came: the load orders this thread after the accepts.) */
    if (ps->reads % 4 == 0 && atomic_load(&t->accepted) == STREAMS) {
      struct pstream *other = &t->ps[(ps->index + 1) % STREAMS];
      struct pstream *to = ps->reads % 8 == 0 ? ps : other;
      atomic_fetch_add(&t->cb_posted, 1);
      if (taxi_stream_post(to->s, cb_post_ran, to) < 0) {
        atomic_fetch_add(&t->cb_posted, -1);
        atomic_fetch_add(&t->refused, 1);
      }
    }
    /* A write with a callback every 8th read: at most two records per
     * such write, IN_FLIGHT bytes in flight, 1024 records. */
    if (taxi_stream_write(s, data, len, told ? ps_written : NULL, ps) < 0)
      atomic_fetch_add(&t->refused, 1);
  } else {
    taxi_stream_end(s);
  }
  leave(ps);
}

static void ps_drained(taxi_stream_t *s) {
  struct pstream *ps = taxi_stream_data(s);
  enter(ps);
  leave(ps);
}

static void ps_closed(taxi_stream_t *s, int reason) {
  struct pstream *ps = taxi_stream_data(s);
  (void)reason;
  enter(ps);
  atomic_fetch_add(&ps->t->closed, 1);
  leave(ps);
}

static void ps_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct post_test *t = arg;
  (void)l;
  int i = atomic_load(&t->accepted);
  struct pstream *ps = &t->ps[i];
  ps->t = t;
  ps->s = s;
  ps->index = i;
  taxi_stream_ref(s); /* the posting threads use it */
  taxi_stream_set_data(s, ps);
  taxi_stream_on_close(s, ps_closed);
  taxi_stream_on_drain(s, ps_drained);
  taxi_stream_read_start(s, ps_read);
  atomic_store(&t->accepted, i + 1);
}

static void rec_ran(taxi_stream_t *s, int status, void *arg) {
  struct post_rec *r = arg;
  struct pstream *ps = &r->t->ps[r->stream];
  enter(ps);
  if (status != 0 || s != ps->s) atomic_fetch_add(&r->t->bad, 1);
  atomic_fetch_add(&r->ran, 1);
  atomic_fetch_add(&r->t->posts_ran, 1);
  leave(ps);
}

struct poster {
  struct post_test *t;
  int thread;
};

static void poster_main(void *arg) {
  struct poster *p = arg;
  struct post_test *t = p->t;
  unsigned x = 2654435761u * (unsigned)(p->thread + 1);
  for (int i = 0; i < t->per_thread; i++) {
    struct post_rec *r = &t->recs[p->thread * t->per_thread + i];
    x = x * 1103515245u + 12345u;
    r->t = t;
    r->stream = (int)((x >> 8) % STREAMS);
    if (taxi_stream_post(t->ps[r->stream].s, rec_ran, r) < 0)
      atomic_fetch_add(&t->refused, 1);
  }
  atomic_fetch_add(&t->posters_done, 1);
}

/* One client per stream, all in this thread: each sends its own byte
 * sequence, at most IN_FLIGHT bytes ahead of the echo, and checks every
 * byte echoed.  It goes on until every client has had `total` bytes
 * echoed and the posting threads are done.  0, or -1 after saying why. */
static int clients_run(struct post_test *t, const int *fds, long total) {
  static long sent[STREAMS], got[STREAMS];
  unsigned char buf[IN_FLIGHT];
  memset(sent, 0, sizeof sent);
  memset(got, 0, sizeof got);
  taxi_time_t start = taxi_now();
  for (;;) {
    /* Done once every echo is back: no read callback runs after this. */
    int all = atomic_load(&t->posters_done) == POSTERS;
    for (int i = 0; i < STREAMS && all; i++)
      all = got[i] >= total && got[i] == sent[i];
    if (all) break;
    if (util_elapsed_ms(start) > 60000) {
      printf("(clients stuck) ");
      return -1;
    }
    bool more = atomic_load(&t->posters_done) < POSTERS;
    struct pollfd p[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
      p[i].fd = fds[i];
      p[i].events = POLLIN;
      if (sent[i] - got[i] < IN_FLIGHT && (sent[i] < total || more))
        p[i].events |= POLLOUT;
    }
    if (poll(p, STREAMS, 100) < 0 && errno != EINTR) return -1;
    for (int i = 0; i < STREAMS; i++) {
      if (p[i].revents & POLLOUT) {
        size_t n = (size_t)(IN_FLIGHT - (sent[i] - got[i]));
        if (n > 700) n = 700; /* several segments per window */
        for (size_t k = 0; k < n; k++)
          buf[k] = st_byte((unsigned)i, (uint64_t)sent[i] + k);
        ssize_t k = send(fds[i], buf, n, MSG_NOSIGNAL);
        if (k > 0) sent[i] += k;
      }
      if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = recv(fds[i], buf, sizeof buf, 0);
        if (k <= 0 && !(k < 0 && (errno == EAGAIN || errno == EINTR))) {
          printf("(client %d: %s after %ld bytes) ", i,
                 k == 0 ? "EOF" : strerror(errno), got[i]);
          return -1;
        }
        for (ssize_t j = 0; j < k; j++)
          if (buf[j] != st_byte((unsigned)i, (uint64_t)(got[i] + j))) {
            printf("(client %d: byte %ld differs) ", i, got[i] + (long)j);
            return -1;
          }
        if (k > 0) got[i] += k;
      }
    }
  }
  return 0;
}

static int all_posts_ran(void *arg) {
  struct post_test *t = arg;
  return atomic_load(&t->posts_ran) == (long)POSTERS * t->per_thread &&
         atomic_load(&t->cb_ran) == atomic_load(&t->cb_posted);
}

static int all_closed(void *arg) {
  struct post_test *t = arg;
  return atomic_load(&t->closed) == STREAMS;
}

static void test_post_while_echoing(void) {
  static struct post_test t;
  memset(&t, 0, sizeof t);
  t.per_thread = util_test_small() ? 300 : 2000;
  long total = util_test_small() ? 8192 : 65536;
  t.recs = calloc((size_t)POSTERS * (size_t)t.per_thread, sizeof *t.recs);
  CU_ASSERT_FATAL(t.recs != NULL);
  st_io_t c;
  if (st_io_create(&c) < 0) {
    free(t.recs);
    return;
  }
  taxi_stream_options_t so;
  taxi_stream_options_init(&so);
  so.max_writes = 1024;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.stream = &so;
  int port = st_listen(&c, &lo, ps_accept, &t, NULL);
  st_io_run(&c);
  int fds[STREAMS];
  /* One at a time, so that stream i is client i's. */
  for (int i = 0; i < STREAMS; i++) {
    fds[i] = st_connect(port);
    CU_ASSERT_FATAL(fds[i] >= 0);
    CU_ASSERT_FATAL(util_wait_flag(&t.accepted, i + 1, 10000));
    util_set_nonblock(fds[i]);
  }
  util_thread_t th[POSTERS];
  struct poster pp[POSTERS];
  for (int i = 0; i < POSTERS; i++) {
    pp[i].t = &t;
    pp[i].thread = i;
    CU_ASSERT_EQUAL(util_thread_start(&th[i], poster_main, &pp[i]), 0);
  }
  CU_ASSERT_EQUAL(clients_run(&t, fds, total), 0);
  for (int i = 0; i < POSTERS; i++) util_thread_join(&th[i], 30000, "poster");
  CU_ASSERT(st_wait(all_posts_ran, &t, 20000));
  int twice = 0, never = 0;
  for (long i = 0; i < (long)POSTERS * t.per_thread; i++) {
    int n = atomic_load(&t.recs[i].ran);
    if (n == 0) never++;
    if (n > 1) twice++;
  }
  if (never || twice)
    printf("(%d posts never ran, %d more than once) ", never, twice);
  CU_ASSERT_EQUAL(never, 0);
  CU_ASSERT_EQUAL(twice, 0);
  CU_ASSERT_EQUAL(atomic_load(&t.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.refused), 0);
  CU_ASSERT(atomic_load(&t.cb_posted) > 0);
  for (int i = 0; i < STREAMS; i++) close(fds[i]);
  CU_ASSERT(st_wait(all_closed, &t, 20000));
  st_io_destroy(&c);
  /* Every post had run: none was left to cancel. */
  CU_ASSERT_EQUAL(atomic_load(&t.bad), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.overlaps), 0);
  for (int i = 0; i < STREAMS; i++) taxi_stream_unref(t.ps[i].s);
  free(t.recs);
}

/* ---- a close before the posts ran: TAXI_ECANCELED, before on_close ---------
 */

struct cancel_test {
  taxi_stream_t *s;
  atomic_int order[8]; /* what ran, in order: 1..5 the posts, 9 close */
  atomic_int n, statuses_bad, closed;
  int rc_after_close;
};

static void cx_note(struct cancel_test *x, int what) {
  int i = atomic_fetch_add(&x->n, 1);
  if (i < 8) atomic_store(&x->order[i], what);
}

static void cx_post(taxi_stream_t *s, int status, void *arg) {
  struct cancel_test *x = taxi_stream_data(s);
  if (status != TAXI_ECANCELED) atomic_fetch_add(&x->statuses_bad, 1);
  cx_note(x, (int)(intptr_t)arg);
}

static void cx_never(taxi_stream_t *s, int status, void *arg) {
  (void)s;
  (void)status;
  (void)arg;
  CU_FAIL("a post refused with TAXI_EBADF ran");
}

static void cx_closed(taxi_stream_t *s, int reason) {
  struct cancel_test *x = taxi_stream_data(s);
  (void)reason;
  cx_note(x, 9);
  atomic_store(&x->closed, 1);
}

static void cx_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct cancel_test *x = taxi_stream_data(s);
  (void)data;
  (void)len;
  if (status < 0) return;
  /* Posted from the stream's own callback: they wait for it to return,
   * and the close it asks for comes first. */
  for (intptr_t i = 1; i <= 5; i++)
    CU_ASSERT_EQUAL(taxi_stream_post(s, cx_post, (void *)i), 0);
  CU_ASSERT_EQUAL(taxi_stream_close(s), 0);
  x->rc_after_close = taxi_stream_post(s, cx_never, NULL);
}

static void cx_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct cancel_test *x = arg;
  (void)l;
  x->s = s;
  taxi_stream_set_data(s, x);
  taxi_stream_on_close(s, cx_closed);
  taxi_stream_read_start(s, cx_read);
}

static void test_post_cancelled_at_close(void) {
  static struct cancel_test x;
  memset(&x, 0, sizeof x);
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  int port = st_listen(&c, NULL, cx_accept, &x, NULL);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(net_send_all(fd, "x", 1), 0);
  CU_ASSERT(util_wait_flag(&x.closed, 1, 10000));
  CU_ASSERT_EQUAL(x.rc_after_close, TAXI_EBADF);
  CU_ASSERT_EQUAL(atomic_load(&x.n), 6);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(atomic_load(&x.order[i]), i + 1);
  CU_ASSERT_EQUAL(atomic_load(&x.order[5]), 9); /* on_close last */
  CU_ASSERT_EQUAL(atomic_load(&x.statuses_bad), 0);
  close(fd);
  st_io_destroy(&c);
}

/* ---- refusals; a stopped context; order from one thread --------------------
 */

struct order_test {
  atomic_int next, out_of_order, ran, stopped_rc;
  taxi_stream_t *s;
  atomic_int accepted;
};

static void ord_post(taxi_stream_t *s, int status, void *arg) {
  struct order_test *o = taxi_stream_data(s);
  int want = atomic_load(&o->next);
  if ((int)(intptr_t)arg != want || status != 0)
    atomic_fetch_add(&o->out_of_order, 1);
  atomic_store(&o->next, want + 1);
  atomic_fetch_add(&o->ran, 1);
}

static void ord_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct order_test *o = arg;
  (void)l;
  taxi_stream_set_data(s, o);
  taxi_stream_ref(s);
  o->s = s;
  atomic_store(&o->accepted, 1);
}

static void io_never(taxi_io_t *io, int status, void *arg) {
  (void)io;
  (void)status;
  (void)arg;
  CU_FAIL("a refused post ran");
}

static void test_post_refusals_and_order(void) {
  static struct order_test o;
  memset(&o, 0, sizeof o);
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  CU_ASSERT_EQUAL(taxi_stream_post(NULL, ord_post, NULL), TAXI_EINVAL);
  CU_ASSERT(strstr(taxi_error_detail(), "taxi_stream_post") != NULL);
  CU_ASSERT_EQUAL(taxi_io_post(NULL, io_never, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_io_post(c.io, NULL, NULL), TAXI_EINVAL);
  CU_ASSERT_EQUAL(taxi_listener_post(NULL, NULL, NULL), TAXI_EINVAL);
  taxi_listener_t *l;
  int port = st_listen(&c, NULL, ord_accept, &o, &l);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_FATAL(util_wait_flag(&o.accepted, 1, 10000));
  CU_ASSERT_EQUAL(taxi_stream_post(o.s, NULL, NULL), TAXI_EINVAL);
  /* From one thread, in order. */
  for (intptr_t i = 0; i < 1000; i++)
    CU_ASSERT_EQUAL(taxi_stream_post(o.s, ord_post, (void *)i), 0);
  CU_ASSERT(util_wait_flag(&o.ran, 1000, 10000));
  CU_ASSERT_EQUAL(atomic_load(&o.out_of_order), 0);
  /* Once stopped, nothing would run a post before taxi_io_destroy. */
  CU_ASSERT_EQUAL(st_io_stop(&c), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_stream_post(o.s, ord_post, NULL), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_io_post(c.io, io_never, NULL), TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(taxi_listener_post(l, NULL, NULL), TAXI_EINVAL);
  close(fd);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&o.ran), 1000);
  /* Closed (the context is gone, the reference kept the memory). */
  CU_ASSERT_EQUAL(taxi_stream_unref(o.s), 0);
}

/* ---- the context's posts ---------------------------------------------------
 */

struct io_post_test {
  atomic_int inside, overlaps, ran, cancelled, bad;
  int per_thread;
};

static void iop_ran(taxi_io_t *io, int status, void *arg) {
  struct io_post_test *t = arg;
  (void)io;
  if (atomic_exchange(&t->inside, 1)) atomic_fetch_add(&t->overlaps, 1);
  if (status == 0)
    atomic_fetch_add(&t->ran, 1);
  else if (status == TAXI_ECANCELED)
    atomic_fetch_add(&t->cancelled, 1);
  else
    atomic_fetch_add(&t->bad, 1);
  atomic_store(&t->inside, 0);
}

struct io_poster {
  taxi_io_t *io;
  struct io_post_test *t;
};

static void io_poster_main(void *arg) {
  struct io_poster *p = arg;
  for (int i = 0; i < p->t->per_thread; i++)
    if (taxi_io_post(p->io, iop_ran, p->t) < 0) atomic_fetch_add(&p->t->bad, 1);
}

static void test_io_post(void) {
  static struct io_post_test t;
  memset(&t, 0, sizeof t);
  t.per_thread = util_test_small() ? 500 : 5000;
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  st_io_run(&c);
  util_thread_t th[POSTERS];
  struct io_poster pp[POSTERS];
  for (int i = 0; i < POSTERS; i++) {
    pp[i].io = c.io;
    pp[i].t = &t;
    CU_ASSERT_EQUAL(util_thread_start(&th[i], io_poster_main, &pp[i]), 0);
  }
  for (int i = 0; i < POSTERS; i++)
    util_thread_join(&th[i], 30000, "io poster");
  CU_ASSERT(util_wait_flag(&t.ran, POSTERS * t.per_thread, 20000));
  CU_ASSERT_EQUAL(atomic_load(&t.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.bad), 0);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&t.ran), POSTERS * t.per_thread);
  CU_ASSERT_EQUAL(atomic_load(&t.cancelled), 0);

  /* Posted to a context that never runs: cancelled by its destroy, in
   * this thread, each once. */
  memset(&t, 0, sizeof t);
  if (st_io_create(&c) < 0) return;
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(taxi_io_post(c.io, iop_ran, &t), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.ran) + atomic_load(&t.cancelled), 0);
  st_io_destroy(&c);
  CU_ASSERT_EQUAL(atomic_load(&t.cancelled), 3);
  CU_ASSERT_EQUAL(atomic_load(&t.ran), 0);
}

/* ---- a listener's posts ----------------------------------------------------
 */

struct lpost_test {
  taxi_listener_t *l;
  atomic_int inside, overlaps, accepted, ran, cancelled, bad, closed;
  atomic_int posters_done;
  int per_thread, on_close_rc;
  atomic_int order_bad; /* a cancelled post told after on_close */
};

static void lp_enter(struct lpost_test *t) {
  if (atomic_exchange(&t->inside, 1)) atomic_fetch_add(&t->overlaps, 1);
}

static void lp_ran(taxi_listener_t *l, int status, void *arg) {
  struct lpost_test *t = arg;
  lp_enter(t);
  if (l != t->l) atomic_fetch_add(&t->bad, 1);
  if (status == 0) {
    atomic_fetch_add(&t->ran, 1);
  } else if (status == TAXI_ECANCELED) {
    atomic_fetch_add(&t->cancelled, 1);
    if (atomic_load(&t->closed)) atomic_fetch_add(&t->order_bad, 1);
  } else {
    atomic_fetch_add(&t->bad, 1);
  }
  atomic_store(&t->inside, 0);
}

static void lp_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct lpost_test *t = arg;
  lp_enter(t);
  (void)l;
  atomic_fetch_add(&t->accepted, 1);
  /* From the accept callback: not run inside it. */
  if (taxi_listener_post(l, lp_ran, t) < 0) atomic_fetch_add(&t->bad, 1);
  taxi_stream_close(s);
  atomic_store(&t->inside, 0);
}

static void lp_on_close(taxi_listener_t *l, void *arg) {
  struct lpost_test *t = arg;
  t->on_close_rc = taxi_listener_post(l, lp_ran, t);
  atomic_store(&t->closed, 1);
}

struct lposter {
  struct lpost_test *t;
};

static void lposter_main(void *arg) {
  struct lpost_test *t = ((struct lposter *)arg)->t;
  for (int i = 0; i < t->per_thread; i++)
    if (taxi_listener_post(t->l, lp_ran, t) < 0) atomic_fetch_add(&t->bad, 1);
  atomic_fetch_add(&t->posters_done, 1);
}

static void test_listener_post(void) {
  static struct lpost_test t;
  memset(&t, 0, sizeof t);
  t.per_thread = util_test_small() ? 200 : 2000;
  int conns = util_test_small() ? 50 : 200;
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.on_close = lp_on_close;
  int port = st_listen(&c, &lo, lp_accept, &t, &t.l);
  st_io_run(&c);
  util_thread_t th[4];
  struct lposter pp[4];
  for (int i = 0; i < 4; i++) {
    pp[i].t = &t;
    CU_ASSERT_EQUAL(util_thread_start(&th[i], lposter_main, &pp[i]), 0);
  }
  /* Accept callbacks meanwhile. */
  for (int i = 0; i < conns; i++) {
    int fd = st_connect(port);
    CU_ASSERT(fd >= 0);
    if (fd >= 0) close(fd);
  }
  for (int i = 0; i < 4; i++) util_thread_join(&th[i], 30000, "poster");
  CU_ASSERT(util_wait_flag(&t.accepted, conns, 20000));
  int want = 4 * t.per_thread + conns;
  CU_ASSERT(util_wait_flag(&t.ran, want, 20000));
  CU_ASSERT_EQUAL(atomic_load(&t.overlaps), 0);
  CU_ASSERT_EQUAL(atomic_load(&t.bad), 0);

  /* A stopped context refuses them, on_close's included. */
  CU_ASSERT_EQUAL(st_io_stop(&c), TAXI_ESTOPPED);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_EQUAL(taxi_listener_post(t.l, lp_ran, &t), TAXI_ESTOPPED);
  st_io_destroy(&c); /* closes the listener */
  CU_ASSERT_EQUAL(atomic_load(&t.closed), 1);
  CU_ASSERT_EQUAL(t.on_close_rc, TAXI_ESTOPPED);
  CU_ASSERT_EQUAL(atomic_load(&t.ran), want);
  CU_ASSERT_EQUAL(atomic_load(&t.order_bad), 0);
}

struct lcancel_test {
  taxi_listener_t *l;
  atomic_int cancelled, ran, closed, order_bad;
  int on_close_rc;
};

static void lc_post(taxi_listener_t *l, int status, void *arg) {
  struct lcancel_test *x = arg;
  (void)l;
  if (status == TAXI_ECANCELED)
    atomic_fetch_add(&x->cancelled, 1);
  else
    atomic_fetch_add(&x->ran, 1);
  if (atomic_load(&x->closed)) atomic_fetch_add(&x->order_bad, 1);
}

static void lc_on_close(taxi_listener_t *l, void *arg) {
  struct lcancel_test *x = arg;
  x->on_close_rc = taxi_listener_post(l, lc_post, x);
  atomic_store(&x->closed, 1);
}

static void lc_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct lcancel_test *x = arg;
  taxi_stream_close(s);
  for (int i = 0; i < 5; i++)
    CU_ASSERT_EQUAL(taxi_listener_post(l, lc_post, x), 0);
  CU_ASSERT_EQUAL(taxi_listener_close(l), 0);
}

static void test_listener_post_cancelled(void) {
  static struct lcancel_test x;
  memset(&x, 0, sizeof x);
  st_io_t c;
  if (st_io_create(&c) < 0) return;
  taxi_listener_options_t lo;
  taxi_listener_options_init(&lo);
  lo.on_close = lc_on_close;
  int port = st_listen(&c, &lo, lc_accept, &x, &x.l);
  st_io_run(&c);
  int fd = st_connect(port);
  CU_ASSERT(fd >= 0);
  CU_ASSERT(util_wait_flag(&x.closed, 1, 10000));
  CU_ASSERT_EQUAL(atomic_load(&x.cancelled), 5);
  CU_ASSERT_EQUAL(atomic_load(&x.ran), 0);
  CU_ASSERT_EQUAL(atomic_load(&x.order_bad), 0);
  CU_ASSERT_EQUAL(x.on_close_rc, TAXI_EBADF);
  if (fd >= 0) close(fd);
  st_io_destroy(&c);
}

CU_TestInfo st_tests_post[] = {
    {"8 threads post to 100 echoing streams: serialised, each once",
     test_post_while_echoing},
    {"posts a close overtakes: TAXI_ECANCELED, in order, before on_close",
     test_post_cancelled_at_close},
    {"post refusals, order from one thread, a stopped context",
     test_post_refusals_and_order},
    {"the context's posts: serialised, each once, cancelled by destroy",
     test_io_post},
    {"a listener's posts: never beside an accept callback, each once",
     test_listener_post},
    {"a listener's posts a close overtakes: TAXI_ECANCELED before on_close",
     test_listener_post_cancelled},
    CU_TEST_INFO_NULL,
};
