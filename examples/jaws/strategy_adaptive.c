/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/strategy_adaptive.c - the adaptive strategy: the paper's
 * conclusion (an optimal server adapts its concurrency strategy to load
 * and file size) as a State pattern over two I/O contexts in one process.
 *
 *   SYNC   Leader/Followers over the default reactor backend (--threads);
 *          it owns the listener, the header-timeout sweep and the load
 *          timer.
 *   ASYNC  the Proactor (--backend; uring where it works, else taxi's
 *          default completion backend), with as many threads.
 *
 * The server is in one of two states, decided every ADAPT_PERIOD by
 * adapt_policy.c (by default from what each state is measured to serve
 * in the regime of load the server is in; --adapt-policy threshold: from
 * the open connections and the share of large responses alone):
 *
 *   SYNC_ONLY  every connection is served in SYNC;
 *   HYBRID     a large response goes out by the Proactor's transmit-file:
 *              its connection moves to ASYNC for it; a small response
 *              moves it back.
 *
 * A move happens only between responses: when the session hands the sink
 * a response that belongs in the other context and nothing is queued on
 * the stream, the sink keeps the response (and any pipelined one after
 * it), detaches the stream (taxi_stream_detach), and the detach callback
 * opens the connection in the other context, queues the kept responses
 * there, feeds it the bytes the old stream had read but not delivered and
 * reads on.  The session (with any pipelined requests in its buffer) and
 * the connection object outlive the streams that serve them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "adapt_policy.h"
#include "http_session.h"
#include "jaws.h"
#include "jaws_os.h"
#include "stream_common.h"
#include "../quote/quote_net.h"

#define SWEEP_BATCH 256
#define ADAPT_PERIOD_MS 100u
#define ADAPT_PERIOD ((taxi_time_t)ADAPT_PERIOD_MS * TAXI_NSEC_PER_MSEC)
/* The open connections are sampled this often: a server ends a
 * connection once its last bytes are in the socket's buffer, so one
 * sample a period swings between none and all the clients. */
#define COUNT_PERIOD (10 * TAXI_NSEC_PER_MSEC)

enum { SYNC, ASYNC };

struct adaptive;

/* A response kept while its connection moves. */
struct kept {
  char *head;
  size_t head_len;
  struct vfs_file *file;
  uint64_t off, len;
  bool close;
};

struct conn {
  pthread_mutex_t lock;
  atomic_uint refs;      /* the connection's (until it is gone), sweeps' */
  taxi_stream_t *stream; /* the stream serving it now */
  int where;             /* SYNC or ASYNC */
  struct http_session *sess;
  struct adaptive *ad;
  bool reading, closed, eof, moving;
  struct kept kept[HTTP_SESSION_INFLIGHT];
  unsigned nkept;
  char *extra; /* bytes handed over by a detach that did not fit yet */
  size_t extra_len, extra_off;
  struct conn *prev, *next; /* every open connection, for the sweep */
};

struct adaptive {
  struct jaws_server *srv;
  taxi_io_t *io[2];
  taxi_stream_options_t so;
  /* Guards alive[]: a detach callback opens a stream in the other
   * context only while that context is not being destroyed. */
  pthread_mutex_t ctx_lock;
  bool alive[2];
  pthread_mutex_t list_lock;
  struct conn *list;
  atomic_int state;
  /* Responses with a body answered since the last look, their body
   * bytes, and those of large ones. */
  atomic_ullong responses, bytes, large_bytes;
  /* Responses written whole since the last look, and their body bytes. */
  atomic_ullong served, served_bytes;
  atomic_ullong moves[2]; /* into SYNC, into ASYNC */
  atomic_ullong changes;
  /* The timer's: the decisions, when it last looked, the moves then. */
  struct adapt_policy policy;
  atomic_ullong conn_sum; /* the samples of the open connections */
  atomic_uint conn_samples;
  int64_t last_ms;
  unsigned long long last_moves;
  /* Connections do not come back from ASYNC: IOCP keeps a socket bound to
   * its completion port, which no other proactor can then attach. */
  bool one_way;
  pthread_t async_thread;
  int async_rc;
};

struct sending {
  struct conn *c;
  struct vfs_file *file;
  uint64_t len; /* of the body */
};

static void on_read(taxi_stream_t *s, int status, const void *data, size_t len);

static void conn_unref(struct conn *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  pthread_mutex_destroy(&c->lock);
  http_session_free(c->sess);
  free(c->extra);
  free(c);
}

static void drop_kept(struct conn *c) {
  for (unsigned i = 0; i < c->nkept; i++) {
    vfs_release(c->kept[i].file);
    free(c->kept[i].head);
  }
  c->nkept = 0;
}

/* The connection is over (its last stream closed, or a move failed):
 * off the list, out of the count, the list's reference dropped. */
static void conn_gone(struct conn *c) {
  struct adaptive *ad = c->ad;
  pthread_mutex_lock(&ad->list_lock);
  if (c->prev)
    c->prev->next = c->next;
  else
    ad->list = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&ad->list_lock);
  jaws_leave(ad->srv);
  conn_unref(c);
}

/* Under c->lock: hand the session bytes a detach brought that did not fit
 * its buffer before, as room appears. */
static enum http_step feed_extra(struct conn *c, enum http_step step) {
  while (step != HTTP_CLOSE && c->extra_off < c->extra_len) {
    size_t room = http_session_room(c->sess);
    size_t n = c->extra_len - c->extra_off;
    if (step == HTTP_BUSY || room == 0) break;
    if (n > room) n = room;
    step =
        http_session_feed(c->sess, c->extra + c->extra_off, n, jaws_now_ms());
    c->extra_off += n;
  }
  if (c->extra && c->extra_off == c->extra_len) {
    free(c->extra);
    c->extra = NULL;
    c->extra_len = c->extra_off = 0;
  }
  return step;
}

/* Under c->lock: after the session moved, read or not, end or not. */
static void settle(struct conn *c, enum http_step step) {
  if (c->closed || c->moving) return;
  step = feed_extra(c, step);
  if (c->moving) return; /* the bytes fed made it move */
  if (step == HTTP_CLOSE) {
    if (c->reading) taxi_stream_read_stop(c->stream);
    c->reading = false;
    return;
  }
  if (c->eof) {
    if (step != HTTP_BUSY && http_session_inflight(c->sess) == 0)
      taxi_stream_end(c->stream);
    return;
  }
  bool want = step != HTTP_BUSY && c->extra == NULL &&
              http_session_room(c->sess) >= JAWS_READ_BUFFER;
  if (want && !c->reading)
    c->reading = taxi_stream_read_start(c->stream, on_read) == 0;
  else if (!want && c->reading) {
    taxi_stream_read_stop(c->stream);
    c->reading = false;
  }
}

static void on_sent(taxi_stream_t *s, int status, size_t bytes, void *arg) {
  struct sending *snd = arg;
  struct conn *c = snd->c;
  (void)s;
  (void)bytes;
  if (status == 0) {
    atomic_fetch_add(&c->ad->served, 1);
    atomic_fetch_add(&c->ad->served_bytes, snd->len);
  }
  vfs_release(snd->file);
  free(snd);
  pthread_mutex_lock(&c->lock);
  http_session_sent(c->sess);
  if (status == 0 && !c->closed && !c->moving)
    settle(c, http_session_process(c->sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

/* Under c->lock: queue a response on the current stream.  The file's
 * reference is taken over in every case.  0, or -1 (the stream closed). */
static int send_now(struct conn *c, const char *head, size_t head_len,
                    struct vfs_file *file, uint64_t off, uint64_t len,
                    bool close) {
  struct sending *snd = malloc(sizeof *snd);
  int rc;
  if (snd == NULL || c->closed) {
    free(snd);
    vfs_release(file);
    return -1;
  }
  snd->c = c;
  snd->file = file;
  snd->len = file ? len : 0;
  if (file == NULL) {
    rc = taxi_stream_write(c->stream, head, head_len, on_sent, snd);
  } else if ((rc = taxi_stream_write(c->stream, head, head_len, NULL, NULL)) ==
             0) {
    if (file->data)
      rc = taxi_stream_write_ref(c->stream, file->data + off, (size_t)len,
                                 on_sent, snd);
    else
      rc = taxi_stream_sendfile(c->stream, file->fd, (int64_t)off, (size_t)len,
                                on_sent, snd);
  }
  if (rc < 0) {
    vfs_release(file);
    free(snd);
    taxi_stream_close(c->stream);
    return -1;
  }
  if (close) taxi_stream_end(c->stream);
  return 0;
}

static void on_close(taxi_stream_t *s, int reason) {
  struct conn *c = taxi_stream_data(s);
  (void)reason;
  pthread_mutex_lock(&c->lock);
  c->closed = true;
  drop_kept(c);
  pthread_mutex_unlock(&c->lock);
  conn_gone(c);
}

/* The detach is over: serve the connection in the other context. */
static void on_detached(taxi_stream_t *old, taxi_handle_t h, const void *unread,
                        size_t len, void *arg) {
  struct conn *c = arg;
  struct adaptive *ad = c->ad;
  taxi_stream_t *s = NULL;
  int to = c->where == SYNC ? ASYNC : SYNC;
  int rc = TAXI_ESTOPPED;
  enum http_step step;
  (void)old;
  pthread_mutex_lock(&c->lock);
  pthread_mutex_lock(&ad->ctx_lock);
  if (ad->alive[to]) rc = taxi_stream_open(&s, ad->io[to], h, &ad->so);
  pthread_mutex_unlock(&ad->ctx_lock);
  if (rc < 0) {
    /* Stopping (or out of memory): the connection ends here. */
    jaws_close(h);
    c->closed = true;
    drop_kept(c);
    pthread_mutex_unlock(&c->lock);
    conn_gone(c);
    return;
  }
  c->stream = s;
  c->where = to;
  c->moving = false;
  c->reading = false;
  atomic_fetch_add(&ad->moves[to], 1);
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
  /* The kept responses first: they answer the earlier requests. */
  for (unsigned i = 0; i < c->nkept; i++) {
    struct kept *k = &c->kept[i];
    if (send_now(c, k->head, k->head_len, k->file, k->off, k->len, k->close) <
        0) {
      for (unsigned j = i + 1; j < c->nkept; j++) {
        vfs_release(c->kept[j].file);
        c->kept[j].file = NULL;
      }
      for (unsigned j = 0; j < c->nkept; j++) free(c->kept[j].head);
      c->nkept = 0;
      pthread_mutex_unlock(&c->lock);
      return; /* the stream closes: on_close ends the connection */
    }
    free(k->head);
    k->head = NULL;
    k->file = NULL;
  }
  c->nkept = 0;
  if (len > 0) {
    /* Bytes the old stream had read: usually none, and they fit. */
    size_t room = http_session_room(c->sess), n = len < room ? len : room;
    if (n < len && (c->extra = malloc(len - n)) != NULL) {
      memcpy(c->extra, (const char *)unread + n, len - n);
      c->extra_len = len - n;
      c->extra_off = 0;
    } else if (n < len) {
      pthread_mutex_unlock(&c->lock);
      taxi_stream_close(s); /* out of memory: cannot keep the bytes */
      return;
    }
    step = http_session_feed(c->sess, unread, n, jaws_now_ms());
  } else {
    step = http_session_process(c->sess, jaws_now_ms());
  }
  settle(c, step);
  pthread_mutex_unlock(&c->lock);
}

/* Where a response belongs: the other context's index, or -1 to stay. */
static int destination(const struct conn *c, const struct http_out *o) {
  struct adaptive *ad = c->ad;
  bool large = o->file != NULL && o->len >= ad->srv->cfg.adapt_large;
  bool hybrid = atomic_load(&ad->state) == ADAPT_HYBRID;
  if (c->closed || c->eof || atomic_load(&ad->srv->stopping) ||
      http_session_inflight(c->sess) != 0)
    return -1;
  /* A connection's last response moves too when it is large (one request
   * per connection is the paper's load), never just to be closed. */
  if (c->where == SYNC && hybrid && large) return ASYNC;
  if (c->where == ASYNC && !(hybrid && large) && !o->close && !ad->one_way)
    return SYNC;
  return -1;
}

/* The sink: called by the session under c->lock. */
static int respond(void *sink, const struct http_out *o) {
  struct conn *c = sink;
  struct adaptive *ad = c->ad;
  if (o->file) {
    atomic_fetch_add(&ad->responses, 1);
    atomic_fetch_add(&ad->bytes, o->len);
    if (o->len >= ad->srv->cfg.adapt_large)
      atomic_fetch_add(&ad->large_bytes, o->len);
  }
  if (!c->moving && destination(c, o) >= 0 &&
      taxi_stream_detach(c->stream, on_detached, c) == 0) {
    c->moving = true;
    c->reading = false;
  }
  if (!c->moving)
    return send_now(c, o->head, o->head_len, o->file, o->off, o->len, o->close);
  /* Moving: keep it for the other context (the session queues at most
   * HTTP_SESSION_INFLIGHT, so it fits). */
  struct kept *k = &c->kept[c->nkept];
  if (c->nkept == HTTP_SESSION_INFLIGHT ||
      (k->head = malloc(o->head_len)) == NULL) {
    vfs_release(o->file);
    return -1;
  }
  memcpy(k->head, o->head, o->head_len);
  k->head_len = o->head_len;
  k->file = o->file;
  k->off = o->off;
  k->len = o->len;
  k->close = o->close;
  c->nkept++;
  return 0;
}

static const struct http_sink_ops adaptive_sink = {respond};

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct conn *c = taxi_stream_data(s);
  enum http_step step;
  pthread_mutex_lock(&c->lock);
  if (c->moving || c->closed) { /* cannot happen after detach: defensive */
    pthread_mutex_unlock(&c->lock);
    return;
  }
  if (status < 0) {
    c->eof = true;
    c->reading = false;
    step = http_session_process(c->sess, jaws_now_ms());
  } else {
    step = http_session_feed(c->sess, data, len, jaws_now_ms());
  }
  settle(c, step);
  pthread_mutex_unlock(&c->lock);
}

static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct adaptive *ad = arg;
  struct conn *c;
  char peer[TAXI_ADDR_STRLEN];
  (void)l;
  if (!jaws_stream_admit(ad->srv, s)) return;
  jaws_stream_peer(s, peer, sizeof peer);
  c = calloc(1, sizeof *c);
  if (c == NULL ||
      (c->sess = http_session_new(ad->srv, &adaptive_sink, c, peer)) == NULL) {
    free(c);
    jaws_leave(ad->srv);
    taxi_stream_close(s);
    return;
  }
  pthread_mutex_init(&c->lock, NULL);
  atomic_init(&c->refs, 1);
  c->stream = s;
  c->where = SYNC;
  c->ad = ad;
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
  pthread_mutex_lock(&ad->list_lock);
  c->next = ad->list;
  if (ad->list) ad->list->prev = c;
  ad->list = c;
  pthread_mutex_unlock(&ad->list_lock);
  pthread_mutex_lock(&c->lock);
  c->reading = taxi_stream_read_start(s, on_read) == 0;
  if (!c->reading) taxi_stream_close(s);
  pthread_mutex_unlock(&c->lock);
}

/* The header timeout (as in strategy_io.c), over both contexts'
 * connections; one moving has a response kept and is not waiting. */
static void on_sweep(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct conn *late[SWEEP_BATCH];
  size_t n = 0;
  int64_t now = jaws_now_ms();
  (void)t;
  pthread_mutex_lock(&ad->list_lock);
  for (struct conn *c = ad->list; c && n < SWEEP_BATCH; c = c->next) {
    if (pthread_mutex_trylock(&c->lock) != 0) continue;
    if (!c->closed && !c->moving && http_session_expired(c->sess, now)) {
      atomic_fetch_add(&c->refs, 1);
      late[n++] = c;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&ad->list_lock);
  for (size_t i = 0; i < n; i++) {
    struct conn *c = late[i];
    pthread_mutex_lock(&c->lock);
    if (!c->closed && !c->moving && http_session_expired(c->sess, now)) {
      if (http_session_timeout(c->sess) >= 0) settle(c, HTTP_CLOSE);
    }
    pthread_mutex_unlock(&c->lock);
    conn_unref(c);
  }
}

static void say_stderr(void *arg, const char *line) {
  (void)arg;
  fprintf(stderr, "%s\n", line);
}

static void on_count(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  (void)t;
  atomic_fetch_add(&ad->conn_sum, atomic_load(&ad->srv->connections));
  atomic_fetch_add(&ad->conn_samples, 1);
}

/* The State decision: every ADAPT_PERIOD, adapt_policy.c from what the
 * period saw. */
static void on_adapt(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct adapt_sample s;
  int64_t now = jaws_now_ms();
  unsigned long long moves =
      atomic_load(&ad->moves[SYNC]) + atomic_load(&ad->moves[ASYNC]);
  int state = atomic_load(&ad->state), next;
  unsigned long long sum = atomic_exchange(&ad->conn_sum, 0);
  unsigned samples = atomic_exchange(&ad->conn_samples, 0);
  (void)t;
  s.connections = samples ? (unsigned)((sum + samples / 2) / samples)
                          : atomic_load(&ad->srv->connections);
  s.responses = atomic_exchange(&ad->responses, 0);
  s.bytes = atomic_exchange(&ad->bytes, 0);
  s.large_bytes = atomic_exchange(&ad->large_bytes, 0);
  s.served = atomic_exchange(&ad->served, 0);
  s.served_bytes = atomic_exchange(&ad->served_bytes, 0);
  s.moves = moves - ad->last_moves;
  s.ms = now - ad->last_ms;
  ad->last_moves = moves;
  ad->last_ms = now;
  next = adapt_policy_step(&ad->policy, &s);
  if (next == state) return;
  atomic_store(&ad->state, next);
  atomic_fetch_add(&ad->changes, 1);
}

static void on_stop(taxi_io_t *io, int signo, void *arg) {
  struct adaptive *ad = arg;
  (void)signo;
  atomic_store(&ad->srv->stopping, 1);
  taxi_io_stop(ad->io[ASYNC]);
  taxi_io_stop(io);
}

/* Where the backend takes no signals (Windows), Ctrl-C comes through
 * quote_on_stop's console handler, on a thread of its own. */
static struct adaptive *console_ad;

static void on_console_stop(void) {
  atomic_store(&console_ad->srv->stopping, 1);
  taxi_io_stop(console_ad->io[ASYNC]);
  taxi_io_stop(console_ad->io[SYNC]);
}

static void *run_async(void *arg) {
  struct adaptive *ad = arg;
  ad->async_rc = taxi_io_run(ad->io[ASYNC]);
  /* ASYNC failing alone would strand its connections: stop it all. */
  if (ad->async_rc < 0) taxi_io_stop(ad->io[SYNC]);
  return NULL;
}

/* The two contexts; 0, or the exit status after a message. */
static int create_contexts(struct adaptive *ad) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  const struct jaws_config *cfg = &ad->srv->cfg;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  int rc;
  o.dispatcher = TAXI_IO_LF;
  o.threads = cfg->threads;
  if ((rc = taxi_io_create(&ad->io[SYNC], &o)) < 0) {
    fprintf(stderr, "jaws: cannot start the reactor side: %s\n",
            taxi_strerror(rc));
    return 1;
  }
  /* Before the proactor side exists (a backend may start threads): the
   * signals are then blocked in every thread. */
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(ad->io[SYNC], stop_signals[i], on_stop, ad)) <
        0) {
      console_ad = ad;
      if (quote_on_stop(on_console_stop) != 0)
        fprintf(stderr, "jaws: no orderly stop on signal %d: %s\n",
                stop_signals[i], taxi_strerror(rc));
    }
  o = (taxi_io_options_t)TAXI_IO_OPTIONS_INIT;
  o.dispatcher = TAXI_IO_PROACTOR;
  o.threads = cfg->threads ? cfg->threads : 2;
  o.backend = cfg->backend ? cfg->backend : "uring";
  rc = taxi_io_create(&ad->io[ASYNC], &o);
  if (rc < 0 && cfg->backend == NULL) {
    o.backend = NULL; /* no io_uring here: the default completion backend */
    rc = taxi_io_create(&ad->io[ASYNC], &o);
  }
  if (rc < 0) {
    fprintf(stderr, "jaws: cannot start the proactor side%s%s: %s\n",
            cfg->backend ? " on backend " : "",
            cfg->backend ? cfg->backend : "", taxi_strerror(rc));
    taxi_io_destroy(ad->io[SYNC]);
    return rc == TAXI_ENOBACKEND ? 2 : 1;
  }
  return 0;
}

static void start_timer(taxi_io_t *io, taxi_io_timer_fn fn, void *arg,
                        taxi_time_t period, const char *what) {
  taxi_io_timer_t *t;
  int rc;
  if ((rc = taxi_io_timer_create(io, &t, fn, arg)) < 0 ||
      (rc = taxi_io_timer_start(t, period, period)) < 0)
    fprintf(stderr, "jaws: no %s: %s\n", what, taxi_strerror(rc));
}

int jaws_run_adaptive(struct jaws_server *srv,
                      const struct jaws_strategy *self) {
  struct adaptive *ad = calloc(1, sizeof *ad);
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  taxi_listener_t *l;
  taxi_addr_t bound;
  char address[300], text[TAXI_ADDR_STRLEN], backends[64];
  taxi_time_t period;
  int rc;
  (void)self;
  if (ad == NULL) {
    fprintf(stderr, "jaws: out of memory\n");
    return 1;
  }
  ad->srv = srv;
  adapt_policy_init(&ad->policy,
                    srv->cfg.adapt_threshold ? ADAPT_THRESHOLD : ADAPT_MEASURE,
                    srv->cfg.adapt_high, srv->cfg.adapt_low, say_stderr, NULL);
  ad->last_ms = jaws_now_ms();
  if ((rc = create_contexts(ad)) != 0) {
    free(ad);
    return rc;
  }
  pthread_mutex_init(&ad->ctx_lock, NULL);
  pthread_mutex_init(&ad->list_lock, NULL);
  ad->alive[SYNC] = ad->alive[ASYNC] = true;
  jaws_stream_options(srv, &ad->so);
  lo.stream = &ad->so;
  snprintf(address, sizeof address,
           strchr(srv->cfg.host, ':') ? "[%s]:%u" : "%s:%u", srv->cfg.host,
           srv->cfg.port);
  if ((rc = taxi_listener_create(&l, ad->io[SYNC], address, &lo, on_accept,
                                 ad)) < 0) {
    fprintf(stderr, "jaws: cannot listen on %s: %s\n", address,
            taxi_strerror(rc));
    taxi_io_destroy(ad->io[ASYNC]);
    taxi_io_destroy(ad->io[SYNC]);
    pthread_mutex_destroy(&ad->ctx_lock);
    pthread_mutex_destroy(&ad->list_lock);
    free(ad);
    return 1;
  }
  period = (taxi_time_t)srv->cfg.header_timeout_ms * TAXI_NSEC_PER_MSEC / 5;
  if (period < 10 * TAXI_NSEC_PER_MSEC) period = 10 * TAXI_NSEC_PER_MSEC;
  if (period > TAXI_NSEC_PER_SEC) period = TAXI_NSEC_PER_SEC;
  start_timer(ad->io[SYNC], on_sweep, ad, period, "header timeout");
  start_timer(ad->io[SYNC], on_count, ad, COUNT_PERIOD, "connection count");
  start_timer(ad->io[SYNC], on_adapt, ad, ADAPT_PERIOD, "adaptation");
  if (pthread_create(&ad->async_thread, NULL, run_async, ad) != 0) {
    fprintf(stderr, "jaws: cannot start the proactor's thread\n");
    taxi_io_destroy(ad->io[ASYNC]);
    taxi_io_destroy(ad->io[SYNC]);
    pthread_mutex_destroy(&ad->ctx_lock);
    pthread_mutex_destroy(&ad->list_lock);
    free(ad);
    return 1;
  }
  taxi_listener_address(l, &bound);
  taxi_addr_format(&bound, text, sizeof text);
  const char *async_backend = taxi_io_backend(ad->io[ASYNC]);
  ad->one_way = async_backend && strncmp(async_backend, "iocp", 4) == 0;
  snprintf(backends, sizeof backends, "%s+%s", taxi_io_backend(ad->io[SYNC]),
           taxi_io_backend(ad->io[ASYNC]));
  jaws_print_listening(srv, backends, taxi_io_threads(ad->io[SYNC]), text);
  rc = taxi_io_run(ad->io[SYNC]);
  atomic_store(&srv->stopping, 1);
  taxi_io_stop(ad->io[ASYNC]);
  pthread_join(ad->async_thread, NULL);
  if (rc == 0) rc = ad->async_rc;
  /* Neither context takes connections any more; moves in progress end
   * their connections (see on_detached).  Then each closes its own. */
  pthread_mutex_lock(&ad->ctx_lock);
  ad->alive[SYNC] = ad->alive[ASYNC] = false;
  pthread_mutex_unlock(&ad->ctx_lock);
  taxi_io_destroy(ad->io[ASYNC]);
  taxi_io_destroy(ad->io[SYNC]);
  snprintf(srv->stop_note, sizeof srv->stop_note,
           " (adaptive: %llu moves to the proactor, %llu back to the "
           "reactor, %llu state changes)",
           (unsigned long long)atomic_load(&ad->moves[ASYNC]),
           (unsigned long long)atomic_load(&ad->moves[SYNC]),
           (unsigned long long)atomic_load(&ad->changes));
  pthread_mutex_destroy(&ad->ctx_lock);
  pthread_mutex_destroy(&ad->list_lock);
  free(ad);
  if (rc < 0) {
    fprintf(stderr, "jaws: stopped by an error: %s\n", taxi_strerror(rc));
    return 1;
  }
  return 0;
}
