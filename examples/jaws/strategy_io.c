/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/strategy_io.c - the strategies over taxi's I/O context:
 * reactive (one thread, the Reactor), lf (a Leader/Followers pool), hsha
 * (half-sync/half-async) and proactive (the Proactor over uring, aio or the
 * emulation).  One code path for all four: the stream layer runs the same
 * callbacks under each dispatcher.
 *
 * A connection is a stream, its HTTP session and a lock: the stream's
 * callbacks never run at once, but the header-timeout sweep (a periodic
 * timer walking every connection) runs beside them.  The sink queues each
 * response as a copied header and a body written from the cached file's
 * memory (zero-copy) or sent from its handle (taxi_stream_sendfile), the
 * file's reference held until that send completes.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "http_session.h"
#include "jaws.h"
#include "jaws_os.h"
#include "jaws_tls.h"
#include "stream_common.h"
#include "../quote/quote_net.h"

#define SWEEP_BATCH 256

struct io_server;

struct conn {
  pthread_mutex_t lock;
  atomic_uint refs; /* the stream's (until its close callback), sweeps' */
  struct jaws_stream_conn sc;
  struct io_server *ios;
  struct conn *prev, *next; /* every open connection, for the sweep */
};

struct io_server {
  struct jaws_server *srv;
  taxi_io_t *io;
  pthread_mutex_t list_lock;
  struct conn *list;
};

/* One response's body (or header) on its way. */
struct sending {
  struct conn *c;
  struct vfs_file *file;
};

static void conn_unref(struct conn *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pthread_mutex_destroy(&c->lock);
  http_session_free(c->sc.sess);
  free(c);
}

static void on_read(taxi_stream_t *s, int status, const void *data, size_t len);

static void on_sent(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct sending *snd = arg;
  struct conn *c = snd->c;
  (void)s;
  (void)bytes;
  vfs_release(snd->file);
  free(snd);
  pthread_mutex_lock(&c->lock);
  http_session_sent(c->sc.sess);
  if (status == 0 && !c->sc.closed)
    jaws_stream_settle(&c->sc, on_read,
                       http_session_process(c->sc.sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

/* The sink: called by the session under c->lock. */
static int respond(void *sink, const struct http_out *o) {
  struct conn *c = sink;
  struct sending *snd = malloc(sizeof *snd);
  int rc;
  if (snd == NULL || c->sc.closed) {
    free(snd);
    vfs_release(o->file);
    return -1;
  }
  snd->c = c;
  snd->file = o->file;
  if (o->file == NULL) {
    rc = taxi_stream_write(c->sc.stream, o->head, o->head_len, on_sent, snd);
  } else if ((rc = taxi_stream_write(c->sc.stream, o->head, o->head_len, NULL,
                                     NULL)) == 0) {
    if (o->file->data)
      rc = taxi_stream_write_ref(c->sc.stream, o->file->data + o->off,
                                 (size_t)o->len, on_sent, snd);
    else
      rc = taxi_stream_sendfile(c->sc.stream, o->file->fd, (int64_t)o->off,
                                (size_t)o->len, on_sent, snd);
  }
  if (rc < 0) {
    vfs_release(o->file);
    free(snd);
    taxi_stream_close(c->sc.stream);
    return -1;
  }
  if (o->close) taxi_stream_end(c->sc.stream);
  return 0;
}

static const struct http_sink_ops stream_sink = {respond};

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct conn *c = taxi_stream_data(s);
  pthread_mutex_lock(&c->lock);
  jaws_stream_read_done(&c->sc, on_read, status, data, len);
  pthread_mutex_unlock(&c->lock);
}

static void on_close(taxi_stream_t *s, int reason) {
  struct conn *c = taxi_stream_data(s);
  struct io_server *ios = c->ios;
  (void)reason;
  pthread_mutex_lock(&ios->list_lock);
  if (c->prev)
    c->prev->next = c->next;
  else
    ios->list = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&ios->list_lock);
  pthread_mutex_lock(&c->lock);
  c->sc.closed = true;
  pthread_mutex_unlock(&c->lock);
  jaws_leave(ios->srv);
  conn_unref(c);
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct io_server *ios = arg;
  struct conn *c;
  char peer[TAXI_ADDR_STRLEN];
  (void)l;
  if (!jaws_stream_admit(ios->srv, s)) return;
  jaws_stream_peer(s, peer, sizeof peer);
  c = calloc(1, sizeof *c);
  if (c == NULL || (c->sc.sess = http_session_new(ios->srv, &stream_sink, c,
                                                  peer)) == NULL) {
    free(c);
    jaws_leave(ios->srv);
    taxi_stream_close(s);
    return;
  }
  pthread_mutex_init(&c->lock, NULL);
  atomic_init(&c->refs, 1);
  c->sc.stream = s;
  c->ios = ios;
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
  /* Before the sweep (another thread) can see c on the list. */
  jaws_stream_accepted(&c->sc, s);
  pthread_mutex_lock(&ios->list_lock);
  c->next = ios->list;
  if (ios->list) ios->list->prev = c;
  ios->list = c;
  pthread_mutex_unlock(&ios->list_lock);
  c->sc.reading = taxi_stream_read_start(s, on_read) == 0;
  if (!c->sc.reading) taxi_stream_close(s);
}

/* The header timeout: connections whose request head has been arriving
 * for too long get 408 and are closed.  Busy connections (their lock
 * taken) are looked at next time. */
static void on_sweep(taxi_io_timer_t *t, void *arg) {
  struct io_server *ios = arg;
  struct conn *late[SWEEP_BATCH];
  size_t n = 0;
  int64_t now = jaws_now_ms();
  (void)t;
  pthread_mutex_lock(&ios->list_lock);
  for (struct conn *c = ios->list; c && n < SWEEP_BATCH; c = c->next) {
    if (pthread_mutex_trylock(&c->lock) != 0) continue;
    if (jaws_stream_overdue(&c->sc, ios->srv, now)) {
      atomic_fetch_add(&c->refs, 1);
      late[n++] = c;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&ios->list_lock);
  for (size_t i = 0; i < n; i++) {
    struct conn *c = late[i];
    pthread_mutex_lock(&c->lock);
    if (jaws_stream_overdue(&c->sc, ios->srv, now))
      jaws_stream_expire(&c->sc, on_read);
    pthread_mutex_unlock(&c->lock);
    conn_unref(c);
  }
}

static void on_stop(taxi_io_t *io, int signo, void *arg) {
  struct jaws_server *srv = arg;
  (void)signo;
  atomic_store(&srv->stopping, 1);
  taxi_io_stop(io);
}

/* Where the backend cannot take signals (Windows: no signal source), the
 * stop comes from quote_on_stop's console handler, on its own thread:
 * taxi_io_stop may be called from any thread. */
static struct jaws_server *console_srv;
static taxi_io_t *console_io;

static void on_console_stop(void) {
  atomic_store(&console_srv->stopping, 1);
  taxi_io_stop(console_io);
}

int jaws_run_io(struct jaws_server *srv, const struct jaws_strategy *self) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  struct io_server ios = {.srv = srv};
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  taxi_stream_options_t so = TAXI_STREAM_OPTIONS_INIT, tso;
  taxi_listener_t *l = NULL;
  taxi_io_timer_t *sweep;
  char address[300], text[TAXI_ADDR_STRLEN], tls_text[TAXI_ADDR_STRLEN] = "";
  taxi_time_t period;
  int rc;

  o.dispatcher = (taxi_io_dispatcher_t)self->kind;
  o.backend = srv->cfg.backend;
  /* One thread is what reactive means; --threads is for the pools (a
   * harness may pass it to every strategy alike). */
  o.threads = self->kind == TAXI_IO_REACTOR ? 1 : srv->cfg.threads;
  if ((rc = taxi_io_create(&ios.io, &o)) < 0) {
    fprintf(stderr, "jaws: cannot start strategy %s%s%s: %s\n", self->name,
            srv->cfg.backend ? " on backend " : "",
            srv->cfg.backend ? srv->cfg.backend : "", taxi_strerror(rc));
    return rc == TAXI_ENOBACKEND ? 2 : 1; /* no such backend here: usage */
  }
  pthread_mutex_init(&ios.list_lock, NULL);
  jaws_stream_options(srv, &so);
  tso = so;
  lo.stream = &so;
  jaws_stream_address(&srv->cfg, srv->cfg.port, address, sizeof address);
  rc = 0;
  if (!srv->cfg.tls_only && (rc = taxi_listener_create(&l, ios.io, address, &lo,
                                                       on_accept, &ios)) < 0)
    fprintf(stderr, "jaws: cannot listen on %s: %s\n", address,
            taxi_strerror(rc));
  else if (srv->tls &&
           jaws_stream_listen_tls(srv, ios.io, &tso, on_accept, &ios) != 0)
    rc = -1;
  if (rc < 0) {
    taxi_io_destroy(ios.io);
    srv->tls_listener = NULL;
    pthread_mutex_destroy(&ios.list_lock);
    return 1;
  }
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(ios.io, stop_signals[i], on_stop, srv)) < 0) {
      console_srv = srv;
      console_io = ios.io;
      if (quote_on_stop(on_console_stop) != 0) {
        fprintf(stderr, "jaws: no orderly stop on signal %d: %s\n",
                stop_signals[i], taxi_strerror(rc));
      }
    }
  period = (taxi_time_t)srv->cfg.header_timeout_ms * TAXI_NSEC_PER_MSEC / 5;
  if (period < 10 * TAXI_NSEC_PER_MSEC) period = 10 * TAXI_NSEC_PER_MSEC;
  if (period > TAXI_NSEC_PER_SEC) period = TAXI_NSEC_PER_SEC;
  if ((rc = taxi_io_timer_create(&sweep, ios.io, on_sweep, &ios)) < 0 ||
      (rc = taxi_io_timer_start(sweep, period, period)) < 0)
    fprintf(stderr, "jaws: no header timeout: %s\n", taxi_strerror(rc));
  if (srv->tls_listener)
    jaws_listener_text(srv->tls_listener, tls_text, sizeof tls_text);
  if (l)
    jaws_listener_text(l, text, sizeof text);
  else
    snprintf(text, sizeof text, "%s", tls_text);
  jaws_print_listening(srv, taxi_io_backend(ios.io), taxi_io_threads(ios.io),
                       text, l && srv->tls_listener ? tls_text : NULL);
  rc = taxi_io_run(ios.io);
  if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  atomic_store(&srv->stopping, 1);
  taxi_io_destroy(ios.io); /* closes the connections: their callbacks run */
  srv->tls_listener = NULL;
  pthread_mutex_destroy(&ios.list_lock);
  if (rc < 0) {
    fprintf(stderr, "jaws: stopped by an error: %s\n", taxi_strerror(rc));
    return 1;
  }
  return 0;
}
