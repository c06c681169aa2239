/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/strategy_adaptive.c - the adaptive strategy: the paper's
 * conclusion (an optimal server adapts its concurrency strategy to load
 * and file size) as a State pattern over its two winning models in one
 * process.
 *
 *   SYNC   the paper's synchronous Thread Pool (strategy_threads.c's
 *          thread-pool), made never to wait on a client: --threads
 *          threads (2 by default) each accept connections and serve
 *          them with plain system calls, reading and sending what is
 *          there, and wait (poll) for the listener and for the next
 *          bytes of the few connections they just accepted or answered.
 *   ASYNC  the Proactor (--backend; uring where it works, else taxi's
 *          default completion backend), with as many threads; it also
 *          runs the header-timeout sweep and the load timers.
 *
 * The server is in one of two states, decided every ADAPT_PERIOD by
 * adapt_policy.c (by default from what each state is measured to serve
 * in the regime of load the server is in; --adapt-policy threshold: from
 * the open connections and the share of large responses alone):
 *
 *   SYNC_ONLY  every response is sent by the pool thread that read its
 *              request;
 *   HYBRID     a large response goes out by the Proactor's transmit-file:
 *              its connection moves to ASYNC, and its thread goes back to
 *              its others.  Where nearly every response is large (90% of
 *              them, smoothed over periods), the Proactor accepts new
 *              connections itself and reads their requests too, and the
 *              pool's threads wait: reading a request on the pool only to
 *              hand the connection over with its answer cost 7-10% of the
 *              throughput with 5 MB files, and a pool thread accepting to
 *              hand each connection over costs a wake-up of the thread
 *              and one of the Proactor per connection.  Both accept from
 *              the one listening socket (the Proactor's listener adopts
 *              it, paused while the pool accepts): its queue is shared,
 *              so no connection is lost when accepting changes hands.
 *
 * A pool thread never waits on a client, since a few clients would
 * otherwise hold all its few threads (the synchronous pool's known
 * weakness) while the Proactor waits for them at no cost.  A connection
 * whose bytes are not there yet (just accepted, just answered, its head
 * in part) waits among its thread's pending connections (struct pending),
 * which hold no thread: the thread accepts and serves others meanwhile.
 * It moves to ASYNC, in either state:
 *
 *   - when it has waited HANDOFF_MS since its accept or its last answer
 *     (a client that connects and sends nothing, or a byte at a time, or
 *     keeps its connection for later), or is the oldest of PENDING_MAX
 *     waiting: a crowd of idle connections costs the pool an accept, a
 *     read and a move each, and never holds up the accepts of others;
 *   - when its socket is full: sends never wait for room, and what a
 *     client has not taken (a slow reader, one that never reads) goes
 *     out by the Proactor.
 *
 * Moves go one way: a connection in ASYNC stays there to its end (its
 * pool thread is serving others by then).
 *
 * A move happens between responses, or within one whose socket filled:
 * the session hands the sink a response (and perhaps pipelined ones after
 * it) that the sink keeps, or the part of it the socket did not take; the
 * pool thread then opens the socket as a stream in ASYNC
 * (taxi_stream_open), queues the kept responses there and reads on.  The
 * session, with any pipelined requests in its buffer, goes with it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "../echo_common.h"
#include "../quote/quote_net.h"
#include "adapt_policy.h"
#include "http_session.h"
#include "jaws.h"
#include "jaws_os.h"
#include "stream_common.h"

#define SWEEP_BATCH 256
#define ADAPT_PERIOD_MS 100u
#define ADAPT_PERIOD ((taxi_time_t)ADAPT_PERIOD_MS * TAXI_NSEC_PER_MSEC)
/* The open connections are sampled this often: a server ends a
 * connection once its last bytes are in the socket's buffer, so one
 * sample a period swings between none and all the clients. */
#define COUNT_PERIOD (10 * TAXI_NSEC_PER_MSEC)
/* How long a connection waits among its pool thread's pending ones for
 * its request (after its accept, or its last answer) before the Proactor
 * waits for it instead.  A client's request follows its connect, and a
 * kept-alive client's next request its last response, well within it on
 * a local network. */
#define HANDOFF_MS 5
/* A pool thread with nothing pending looks at the stop flag this often. */
#define WAIT_MS 200
/* A pool thread's connections waiting for their bytes at most (struct
 * pending), connections it accepts before it looks at them again, and
 * reads of one connection in a turn. */
#define PENDING_MAX 64
#define ACCEPT_BATCH 16
#define TURN_READS 16
#define POOL_THREADS 2
/* The share of responses (smoothed) that are large for HYBRID to move
 * connections at their accept. */
#define ALL_LARGE_RATIO 0.9

enum { SYNC, ASYNC };
/* Why a connection moved: a large response, waiting for bytes, its socket
 * full, or at its accept (where nearly every response is large). */
enum { FOR_LARGE, FOR_WAITING, FOR_FULL, AT_ACCEPT, MOVE_REASONS };

struct adaptive;

/* A response kept while its connection moves, or what is left of it. */
struct kept {
  char *head; /* NULL when none is left */
  size_t head_len;
  struct vfs_file *file;
  uint64_t off, len;
  uint64_t body; /* the whole body's bytes, counted once it is sent */
  bool close;
};

struct conn {
  pthread_mutex_t lock;
  atomic_uint refs;           /* the connection's (until it is gone), sweeps' */
  int where;                  /* SYNC or ASYNC */
  taxi_handle_t fd;           /* SYNC: the blocking socket */
  struct jaws_stream_conn sc; /* ASYNC: the stream serving it */
  struct adaptive *ad;
  bool moving;
  unsigned long long answered; /* responses the session handed the sink */
  struct kept kept[HTTP_SESSION_INFLIGHT];
  unsigned nkept;
  struct conn *prev, *next; /* every connection in ASYNC, for the sweep */
};

struct adaptive {
  struct jaws_server *srv;
  taxi_io_t *io; /* ASYNC */
  taxi_stream_options_t so;
  taxi_handle_t listener;
  /* The Proactor's listener on the same socket, paused unless
   * proactor_accepts; NULL where it could not be made (the pool then
   * accepts every connection and hands over those that move at once). */
  taxi_listener_t *acceptor;
  bool prepared; /* accepted sockets inherit jaws_sock_accept_waits' options */
  /* Guards alive: a pool thread opens a stream in ASYNC only while the
   * context is not being destroyed. */
  pthread_mutex_t ctx_lock;
  bool alive;
  pthread_mutex_t list_lock;
  struct conn *list;
  atomic_int state;
  /* Responses with a body answered since the last look, their body
   * bytes, and those of large ones. */
  atomic_ullong responses, bytes, large_bytes, large_responses;
  /* Responses written whole since the last look, and their body bytes. */
  atomic_ullong served, served_bytes;
  atomic_ullong moves[MOVE_REASONS];
  /* HYBRID where nearly every response is large: a new connection moves
   * at its accept (see on_adapt). */
  atomic_bool move_at_accept;
  /* move_at_accept, and the acceptor resumed: the pool threads wait on
   * pool_cond (under pool_lock) until it is false or the server stops. */
  atomic_bool proactor_accepts;
  atomic_ullong accepted; /* connections the Proactor accepted */
  pthread_mutex_t pool_lock;
  pthread_cond_t pool_cond;
  double large_ratio; /* the timer's: large responses / responses,
                         smoothed */
  atomic_ullong changes;
  /* The timer's: the decisions, when it last looked, the moves then. */
  struct adapt_policy policy;
  atomic_ullong conn_sum; /* the samples of the open connections */
  atomic_uint conn_samples;
  int64_t last_ms;
  unsigned long long last_moves;
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
  http_session_free(c->sc.sess);
  free(c);
}

static void drop_kept(struct conn *c) {
  for (unsigned i = 0; i < c->nkept; i++) {
    vfs_release(c->kept[i].file);
    free(c->kept[i].head);
  }
  c->nkept = 0;
}

/* The connection is over (its stream closed, its pool thread is done
 * with it, or a move failed): off the list (ASYNC) or its socket closed
 * (SYNC), out of the count, its reference dropped. */
static void conn_gone(struct conn *c) {
  struct adaptive *ad = c->ad;
  if (c->where == ASYNC) {
    pthread_mutex_lock(&ad->list_lock);
    if (c->prev)
      c->prev->next = c->next;
    else
      ad->list = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&ad->list_lock);
  } else {
    echo_close(c->fd);
  }
  jaws_leave(ad->srv);
  conn_unref(c);
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
  http_session_sent(c->sc.sess);
  if (status == 0 && !c->sc.closed && !c->moving)
    jaws_stream_settle(&c->sc, on_read,
                       http_session_process(c->sc.sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

/* Under c->lock: queue a response (or what is left of it: head_len may be
 * 0) on the current stream; body: the body's bytes the policy counts once
 * it is sent.  The file's reference is taken over in every case.  0, or
 * -1 (the stream closed). */
static int send_now(struct conn *c, const char *head, size_t head_len,
                    struct vfs_file *file, uint64_t off, uint64_t len,
                    uint64_t body, bool close) {
  struct sending *snd = malloc(sizeof *snd);
  int rc;
  if (snd == NULL || c->sc.closed) {
    free(snd);
    vfs_release(file);
    return -1;
  }
  snd->c = c;
  snd->file = file;
  snd->len = body;
  if (file == NULL) {
    rc = taxi_stream_write(c->sc.stream, head, head_len, on_sent, snd);
  } else if ((rc = head_len ? taxi_stream_write(c->sc.stream, head, head_len,
                                                NULL, NULL)
                            : 0) == 0) {
    if (file->data)
      rc = taxi_stream_write_ref(c->sc.stream, file->data + off, (size_t)len,
                                 on_sent, snd);
    else
      rc = taxi_stream_sendfile(c->sc.stream, file->fd, (int64_t)off,
                                (size_t)len, on_sent, snd);
  }
  if (rc < 0) {
    vfs_release(file);
    free(snd);
    taxi_stream_close(c->sc.stream);
    return -1;
  }
  if (close) taxi_stream_end(c->sc.stream);
  return 0;
}

static void on_close(taxi_stream_t *s, int reason) {
  struct conn *c = taxi_stream_data(s);
  (void)reason;
  pthread_mutex_lock(&c->lock);
  c->sc.closed = true;
  drop_kept(c);
  pthread_mutex_unlock(&c->lock);
  conn_gone(c);
}

/* ---- SYNC: the pool ------------------------------------------------------
 */

/* Under c->lock (SYNC): keep what is left of a response for ASYNC once
 * `sent` bytes of it (head, then body) went; 0 (the session counts it in
 * flight until ASYNC has sent it), or -1. */
static int keep(struct conn *c, const struct http_out *o, uint64_t sent) {
  struct kept *k = &c->kept[c->nkept];
  size_t head_sent = sent < o->head_len ? (size_t)sent : o->head_len;
  uint64_t body_sent = sent - head_sent;
  if (c->nkept == HTTP_SESSION_INFLIGHT) {
    vfs_release(o->file);
    return -1;
  }
  k->head = NULL;
  k->head_len = o->head_len - head_sent;
  if (k->head_len > 0) {
    if ((k->head = malloc(k->head_len)) == NULL) {
      vfs_release(o->file);
      return -1;
    }
    memcpy(k->head, o->head + head_sent, k->head_len);
  }
  k->file = o->file;
  k->off = o->off + body_sent;
  k->len = o->len - body_sent;
  k->body = o->file ? o->len : 0;
  k->close = o->close;
  c->nkept++;
  return 0;
}

/* Under c->lock (SYNC): send a response as far as the socket takes it
 * now: 1 (sent whole), 0 (the socket is full: the rest is kept and the
 * connection moves, so that a client that reads slowly or not at all
 * holds the Proactor's attention, not a pool thread), or -1. */
static int send_sync(struct conn *c, const struct http_out *o) {
  const struct vfs_file *f = o->file;
  uint64_t len = f ? o->len : 0;
  int64_t sent = jaws_sock_send_now(
      c->fd, o->head, o->head_len, f && f->data ? f->data + o->off : NULL,
      f ? f->fd : TAXI_INVALID_HANDLE, o->off, len);
  if (sent < 0) {
    vfs_release(o->file);
    return -1;
  }
  if ((uint64_t)sent == o->head_len + len) {
    atomic_fetch_add(&c->ad->served, 1);
    atomic_fetch_add(&c->ad->served_bytes, len);
    vfs_release(o->file);
    return 1;
  }
  c->moving = true;
  atomic_fetch_add(&c->ad->moves[FOR_FULL], 1);
  return keep(c, o, (uint64_t)sent);
}

/* The sink: called by the session under c->lock. */
static int respond(void *sink, const struct http_out *o) {
  struct conn *c = sink;
  struct adaptive *ad = c->ad;
  c->answered++;
  bool large = o->file != NULL && o->len >= ad->srv->cfg.adapt_large;
  if (o->file) {
    atomic_fetch_add(&ad->responses, 1);
    atomic_fetch_add(&ad->bytes, o->len);
    if (large) {
      atomic_fetch_add(&ad->large_bytes, o->len);
      atomic_fetch_add(&ad->large_responses, 1);
    }
  }
  if (c->where == ASYNC)
    return send_now(c, o->head, o->head_len, o->file, o->off, o->len,
                    o->file ? o->len : 0, o->close);
  /* A large response of a HYBRID server goes by transmit-file (one request
   * per connection is the paper's load: its last response too). */
  if (!c->moving && large && atomic_load(&ad->state) == ADAPT_HYBRID &&
      !atomic_load(&ad->srv->stopping)) {
    c->moving = true;
    atomic_fetch_add(&ad->moves[FOR_LARGE], 1);
  }
  return c->moving ? keep(c, o, 0) : send_sync(c, o);
}

static const struct http_sink_ops adaptive_sink = {respond};

/* Under c->lock: c is served by stream s in ASYNC from now on. */
static void become_async(struct conn *c, taxi_stream_t *s) {
  struct adaptive *ad = c->ad;
  c->sc.stream = s;
  c->fd = TAXI_INVALID_HANDLE; /* the stream's now */
  c->where = ASYNC;
  c->moving = false;
  pthread_mutex_lock(&ad->list_lock);
  c->next = ad->list;
  if (ad->list) ad->list->prev = c;
  ad->list = c;
  pthread_mutex_unlock(&ad->list_lock);
  taxi_stream_set_data(s, c);
  taxi_stream_on_close(s, on_close);
}

/* Move c from its pool thread to ASYNC: open its socket as a stream
 * there, send what was kept, answer what is buffered, read on.  If ASYNC
 * is going away (or out of memory), the connection ends here. */
static void hand_off(struct conn *c) {
  struct adaptive *ad = c->ad;
  taxi_stream_t *s = NULL;
  int rc = TAXI_ESTOPPED;
  pthread_mutex_lock(&ad->ctx_lock);
  if (ad->alive) rc = taxi_stream_open(&s, ad->io, c->fd, &ad->so);
  pthread_mutex_unlock(&ad->ctx_lock);
  pthread_mutex_lock(&c->lock);
  if (rc < 0) {
    c->sc.closed = true;
    drop_kept(c);
    pthread_mutex_unlock(&c->lock);
    conn_gone(c); /* closes the socket, still SYNC's */
    return;
  }
  become_async(c, s);
  /* The kept responses first: they answer the earlier requests. */
  for (unsigned i = 0; i < c->nkept; i++) {
    struct kept *k = &c->kept[i];
    if (send_now(c, k->head, k->head_len, k->file, k->off, k->len, k->body,
                 k->close) < 0) {
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
  jaws_stream_settle(&c->sc, on_read,
                     http_session_process(c->sc.sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

/* What a turn of a pool thread at a connection left it: over (closed),
 * moving to ASYNC, waiting for bytes among its thread's pending
 * connections, or still sending requests (its turn ran out). */
enum turn { TURN_OVER, TURN_MOVE, TURN_WAIT, TURN_BUSY };

/* Serve c on its pool thread with what it has sent, never waiting for
 * more: its requests read as they are there, its responses sent as far as
 * the socket takes them (send_sync).  Once answered it waits among the
 * pending (its next request rarely follows at once: the poll that waits
 * for it costs no more than a read that finds nothing); at most
 * TURN_READS reads of a head that keeps coming, so that a client that
 * keeps sending takes its turn with the others. */
static enum turn serve_turn(struct conn *c) {
  struct jaws_server *srv = c->ad->srv;
  unsigned long long answered = c->answered;
  char buf[8192];
  for (int reads = 0; reads < TURN_READS; reads++) {
    size_t room = http_session_room(c->sc.sess);
    enum http_step step;
    long n;
    if (atomic_load(&srv->stopping)) return TURN_OVER;
    if (room == 0) return TURN_MOVE; /* cannot happen without a kept one */
    n = jaws_sock_recv_timed(c->fd, buf, room < sizeof buf ? room : sizeof buf,
                             0);
    if (n == JAWS_SOCK_TIMEOUT) return TURN_WAIT;
    if (n <= 0) return TURN_OVER;
    pthread_mutex_lock(&c->lock);
    step = http_session_feed(c->sc.sess, buf, (size_t)n, jaws_now_ms());
    pthread_mutex_unlock(&c->lock);
    if (c->moving) return TURN_MOVE;
    if (step == HTTP_CLOSE) return TURN_OVER;
    if (c->answered != answered && !http_session_partial(c->sc.sess))
      return TURN_WAIT;
  }
  return TURN_BUSY;
}

/* A connection of ad for peer, its session made; NULL (out of memory). */
static struct conn *conn_new(struct adaptive *ad, const char *peer) {
  struct conn *c = calloc(1, sizeof *c);
  if (c == NULL || (c->sc.sess = http_session_new(ad->srv, &adaptive_sink, c,
                                                  peer)) == NULL) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  atomic_init(&c->refs, 1);
  c->ad = ad;
  return c;
}

/* A connection waiting in the listener's queue, admitted; NULL if none
 * (the listener is non-blocking: this never waits). */
static struct conn *accept_conn(struct adaptive *ad) {
  struct jaws_server *srv = ad->srv;
  taxi_handle_t fd;
  char peer[64];
  struct conn *c;
  if (!jaws_accept_blocking(srv, ad->listener, ad->prepared, &fd, peer,
                            sizeof peer, HANDOFF_MS))
    return NULL;
  if ((c = conn_new(ad, peer)) == NULL) {
    echo_close(fd);
    jaws_leave(srv);
    return NULL;
  }
  c->fd = fd;
  c->where = SYNC;
  return c;
}

/* While the Proactor accepts, a pool thread waits for it to stop. */
static void park(struct adaptive *ad) {
  pthread_mutex_lock(&ad->pool_lock);
  while (atomic_load(&ad->proactor_accepts) && !atomic_load(&ad->srv->stopping))
    pthread_cond_wait(&ad->pool_cond, &ad->pool_lock);
  pthread_mutex_unlock(&ad->pool_lock);
}

/* A pool thread's connections waiting for their next bytes: a client's
 * request follows its connect, and a kept-alive client's next request its
 * last response, within microseconds to a few milliseconds on a local
 * network, so the thread that accepted or answered it serves it once
 * they come, with the fewest system calls; but none of them holds the
 * thread, which accepts and serves others meanwhile.  One that has waited
 * HANDOFF_MS since its accept or its last answer (a client that sends
 * nothing, a byte at a time, or keeps its connection for later) goes to
 * the Proactor, as does the oldest when PENDING_MAX wait. */
struct pending {
  size_t n;
  struct conn *c[PENDING_MAX];
  int64_t since[PENDING_MAX]; /* when it began to wait, ms */
  /* poll's: [0] the listener, then c[0 .. n) */
  taxi_handle_t fds[PENDING_MAX + 1];
  unsigned char ready[PENDING_MAX + 1];
};

/* Take p's connection i out (the last takes its place). */
static struct conn *take(struct pending *p, size_t i) {
  struct conn *c = p->c[i];
  p->n--;
  p->c[i] = p->c[p->n];
  p->since[i] = p->since[p->n];
  return c;
}

/* c waited too long among the pending (or its thread parks): the Proactor
 * waits for its bytes from now on. */
static void move_waiting(struct conn *c) {
  atomic_fetch_add(&c->ad->moves[FOR_WAITING], 1);
  hand_off(c);
}

/* Give c its turn, then what follows from it: over, moved, or pending,
 * waiting since `since` (its accept, or its last answer before), or since
 * now once answered (the wait for the next request starts) or busy. */
static void turn(struct pending *p, struct conn *c, int64_t since) {
  unsigned long long answered = c->answered;
  switch (serve_turn(c)) {
    case TURN_OVER:
      conn_gone(c);
      return;
    case TURN_MOVE:
      hand_off(c);
      return;
    case TURN_BUSY:
      since = jaws_now_ms();
      break;
    case TURN_WAIT:
      if (c->answered != answered) since = jaws_now_ms();
      break;
  }
  if (p->n == PENDING_MAX) {
    size_t oldest = 0;
    for (size_t i = 1; i < p->n; i++)
      if (p->since[i] < p->since[oldest]) oldest = i;
    move_waiting(take(p, oldest));
  }
  p->c[p->n] = c;
  p->since[p->n++] = since;
}

static void *pool_thread(void *arg) {
  struct adaptive *ad = arg;
  struct pending *p = calloc(1, sizeof *p);
  struct quote_poll *poller = quote_poll_new(PENDING_MAX + 1);
  const char *what = "out of memory";
  if (p == NULL || poller == NULL) {
    fprintf(stderr, "jaws: adaptive: a pool thread cannot start: %s\n", what);
    free(p);
    quote_poll_free(poller);
    return NULL;
  }
  bool queued = true; /* the listener may have connections waiting */
  while (!atomic_load(&ad->srv->stopping)) {
    struct conn *c;
    int64_t now, wait;
    if (atomic_load(&ad->proactor_accepts)) {
      while (p->n > 0) move_waiting(take(p, p->n - 1));
      park(ad);
      queued = true;
      continue;
    }
    /* What the listener has queued first, a batch at a time: accepting
     * never waits for a connection's bytes. */
    for (int i = 0; queued && i < ACCEPT_BATCH && (c = accept_conn(ad)) != NULL;
         i++) {
      if (atomic_load(&ad->move_at_accept)) {
        atomic_fetch_add(&ad->moves[AT_ACCEPT], 1);
        hand_off(c);
      } else {
        turn(p, c, jaws_now_ms());
      }
    }
    /* Then wait for a connection or a pending one's bytes, until the
     * oldest has waited HANDOFF_MS. */
    now = jaws_now_ms();
    wait = WAIT_MS;
    p->fds[0] = ad->listener;
    for (size_t i = 0; i < p->n; i++) {
      int64_t left = p->since[i] + HANDOFF_MS - now;
      if (left < wait) wait = left < 0 ? 0 : left;
      p->fds[i + 1] = p->c[i]->fd;
    }
    if (quote_poll_wait(poller, p->fds, p->n + 1, (int)wait, p->ready, &what) <
        0) {
      /* Cannot happen with valid sockets.  Should it, the pending
       * connections go to the Proactor and the thread naps, not spins. */
      while (p->n > 0) move_waiting(take(p, p->n - 1));
      jaws_sock_wait(TAXI_INVALID_HANDLE, HANDOFF_MS);
      queued = true;
      continue;
    }
    queued = p->ready[0];
    now = jaws_now_ms();
    /* From the end: take() moves the last into the place it empties. */
    for (size_t i = p->n; i-- > 0;) {
      if (p->ready[i + 1]) {
        int64_t since = p->since[i];
        turn(p, take(p, i), since);
      } else if (now - p->since[i] >= HANDOFF_MS) {
        move_waiting(take(p, i));
      }
    }
  }
  while (p->n > 0) conn_gone(take(p, p->n - 1));
  free(p);
  quote_poll_free(poller);
  return NULL;
}

/* ---- ASYNC: the Proactor -------------------------------------------------
 */

static void on_read(taxi_stream_t *s, int status, const void *data,
                    size_t len) {
  struct conn *c = taxi_stream_data(s);
  enum http_step step;
  pthread_mutex_lock(&c->lock);
  if (c->sc.closed) { /* cannot happen once closed: defensive */
    pthread_mutex_unlock(&c->lock);
    return;
  }
  if (status < 0) {
    c->sc.eof = true;
    c->sc.reading = false;
    step = http_session_process(c->sc.sess, jaws_now_ms());
  } else {
    step = http_session_feed(c->sc.sess, data, len, jaws_now_ms());
  }
  jaws_stream_settle(&c->sc, on_read, step);
  pthread_mutex_unlock(&c->lock);
}

/* A connection the Proactor accepted (while proactor_accepts, or taken
 * by an accept in progress as the pool took over again): ASYNC's from
 * its start. */
static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *arg) {
  struct adaptive *ad = arg;
  char peer[TAXI_ADDR_STRLEN];
  struct conn *c;
  (void)l;
  if (!jaws_stream_admit(ad->srv, s)) return;
  jaws_stream_peer(s, peer, sizeof peer);
  if ((c = conn_new(ad, peer)) == NULL) {
    jaws_leave(ad->srv);
    taxi_stream_close(s);
    return;
  }
  atomic_fetch_add(&ad->moves[AT_ACCEPT], 1);
  atomic_fetch_add(&ad->accepted, 1);
  pthread_mutex_lock(&c->lock);
  become_async(c, s);
  jaws_stream_settle(&c->sc, on_read,
                     http_session_process(c->sc.sess, jaws_now_ms()));
  pthread_mutex_unlock(&c->lock);
}

static void on_sweep(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct conn *late[SWEEP_BATCH];
  size_t n = 0;
  int64_t now = jaws_now_ms();
  (void)t;
  pthread_mutex_lock(&ad->list_lock);
  for (struct conn *c = ad->list; c && n < SWEEP_BATCH; c = c->next) {
    if (pthread_mutex_trylock(&c->lock) != 0) continue;
    if (!c->sc.closed && !c->moving && http_session_expired(c->sc.sess, now)) {
      atomic_fetch_add(&c->refs, 1);
      late[n++] = c;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&ad->list_lock);
  for (size_t i = 0; i < n; i++) {
    struct conn *c = late[i];
    pthread_mutex_lock(&c->lock);
    if (!c->sc.closed && !c->moving && http_session_expired(c->sc.sess, now)) {
      if (http_session_timeout(c->sc.sess) >= 0)
        jaws_stream_settle(&c->sc, on_read, HTTP_CLOSE);
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
  /* The pool admits only as many connections as it has threads: the
   * others wait in the listener's queue, and count. */
  atomic_fetch_add(&ad->conn_sum, atomic_load(&ad->srv->connections) +
                                      jaws_sock_backlog(ad->listener));
  atomic_fetch_add(&ad->conn_samples, 1);
}

/* Who accepts: with `at_accept`, the Proactor (its listener resumed, the
 * pool's threads parked), else the pool (the Proactor's listener paused
 * once the pool accepts again: connections meanwhile wait in the queue
 * both share).  Without an acceptor, the pool accepts and moves each
 * connection at once. */
static void set_move_at_accept(struct adaptive *ad, bool at_accept,
                               bool hybrid) {
  int rc;
  if (at_accept == atomic_load(&ad->move_at_accept)) return;
  if (at_accept && ad->acceptor &&
      (rc = taxi_listener_resume(ad->acceptor)) < 0) {
    fprintf(stderr,
            "jaws: adaptive: the proactor cannot accept (%s): the pool "
            "accepts for it\n",
            taxi_strerror(rc));
  } else if (at_accept && ad->acceptor) {
    atomic_store(&ad->proactor_accepts, true);
    fprintf(stderr,
            "jaws: adaptive: the proactor accepts (large responses %.0f%% of "
            "responses)\n",
            ad->large_ratio * 100);
  }
  atomic_store(&ad->move_at_accept, at_accept);
  if (at_accept || !atomic_load(&ad->proactor_accepts)) return;
  if (hybrid)
    fprintf(stderr,
            "jaws: adaptive: the pool accepts again (large responses %.0f%% "
            "of responses)\n",
            ad->large_ratio * 100);
  else
    fprintf(stderr, "jaws: adaptive: the pool accepts again (SYNC_ONLY)\n");
  pthread_mutex_lock(&ad->pool_lock);
  atomic_store(&ad->proactor_accepts, false);
  pthread_cond_broadcast(&ad->pool_cond);
  pthread_mutex_unlock(&ad->pool_lock);
  (void)taxi_listener_pause(ad->acceptor);
}

/* The State decision: every ADAPT_PERIOD, adapt_policy.c from what the
 * period saw. */
static void on_adapt(taxi_io_timer_t *t, void *arg) {
  struct adaptive *ad = arg;
  struct adapt_sample s;
  int64_t now = jaws_now_ms();
  unsigned long long moves = 0, large;
  int state = atomic_load(&ad->state), next;
  unsigned long long sum = atomic_exchange(&ad->conn_sum, 0);
  unsigned samples = atomic_exchange(&ad->conn_samples, 0);
  (void)t;
  for (int i = 0; i < MOVE_REASONS; i++) moves += atomic_load(&ad->moves[i]);
  s.connections = samples ? (unsigned)((sum + samples / 2) / samples)
                          : atomic_load(&ad->srv->connections);
  s.responses = atomic_exchange(&ad->responses, 0);
  s.bytes = atomic_exchange(&ad->bytes, 0);
  s.large_bytes = atomic_exchange(&ad->large_bytes, 0);
  large = atomic_exchange(&ad->large_responses, 0);
  s.served = atomic_exchange(&ad->served, 0);
  s.served_bytes = atomic_exchange(&ad->served_bytes, 0);
  s.moves = moves - ad->last_moves;
  s.ms = now - ad->last_ms;
  ad->last_moves = moves;
  ad->last_ms = now;
  next = adapt_policy_step(&ad->policy, &s);
  /* Where nearly every response is large, a HYBRID pool thread would read
   * each request only to hand its connection over with the answer: it
   * hands the connection over at once instead, and the Proactor reads the
   * request too.  (A pool thread's recv and the move of a kept response
   * cost 7-10% of the throughput with 5 MB files at 200 clients.) */
  if (s.responses > 0)
    ad->large_ratio +=
        ((double)large / (double)s.responses - ad->large_ratio) / 4;
  set_move_at_accept(ad,
                     next == ADAPT_HYBRID && ad->large_ratio >= ALL_LARGE_RATIO,
                     next == ADAPT_HYBRID);
  if (next == state) return;
  atomic_store(&ad->state, next);
  atomic_fetch_add(&ad->changes, 1);
}

static void on_stop(taxi_io_t *io, int signo, void *arg) {
  struct adaptive *ad = arg;
  (void)signo;
  atomic_store(&ad->srv->stopping, 1);
  taxi_io_stop(io);
}

/* Where the backend takes no signals (Windows), Ctrl-C comes through
 * quote_on_stop's console handler, on a thread of its own. */
static struct adaptive *console_ad;

static void on_console_stop(void) {
  atomic_store(&console_ad->srv->stopping, 1);
  taxi_io_stop(console_ad->io);
}

/* The Proactor's context; 0, or the exit status after a message. */
static int create_context(struct adaptive *ad) {
  static const int stop_signals[] = {SIGINT, SIGTERM};
  const struct jaws_config *cfg = &ad->srv->cfg;
  taxi_io_options_t o = TAXI_IO_OPTIONS_INIT;
  int rc;
  o.dispatcher = TAXI_IO_PROACTOR;
  o.threads = cfg->threads ? cfg->threads : POOL_THREADS;
  o.backend = cfg->backend ? cfg->backend : "uring";
  rc = taxi_io_create(&ad->io, &o);
  if (rc < 0 && cfg->backend == NULL) {
    o.backend = NULL; /* no io_uring here: the default completion backend */
    rc = taxi_io_create(&ad->io, &o);
  }
  if (rc < 0) {
    fprintf(stderr, "jaws: cannot start the proactor side%s%s: %s\n",
            cfg->backend ? " on backend " : "",
            cfg->backend ? cfg->backend : "", taxi_strerror(rc));
    return rc == TAXI_ENOBACKEND ? 2 : 1;
  }
  for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++)
    if ((rc = taxi_io_on_signal(ad->io, stop_signals[i], on_stop, ad)) < 0) {
      console_ad = ad;
      if (quote_on_stop(on_console_stop) != 0)
        fprintf(stderr, "jaws: no orderly stop on signal %d: %s\n",
                stop_signals[i], taxi_strerror(rc));
    }
  return 0;
}

static void start_timer(taxi_io_t *io, taxi_io_timer_fn fn, void *arg,
                        taxi_time_t period, const char *what) {
  taxi_io_timer_t *t;
  int rc;
  if ((rc = taxi_io_timer_create(&t, io, fn, arg)) < 0 ||
      (rc = taxi_io_timer_start(t, period, period)) < 0)
    fprintf(stderr, "jaws: no %s: %s\n", what, taxi_strerror(rc));
}

/* The listening socket for the pool, non-blocking (a pool thread polls it
 * beside its pending connections), and the Proactor's listener on it,
 * paused (see set_move_at_accept). */
static void start_acceptor(struct adaptive *ad) {
  const struct jaws_config *cfg = &ad->srv->cfg;
  taxi_listener_options_t lo = TAXI_LISTENER_OPTIONS_INIT;
  int rc;
  /* The options set for the pool first: the Proactor's connections
   * inherit them as well, and set their own over them. */
  ad->prepared = jaws_sock_accept_waits(ad->listener, cfg->send_timeout_ms,
                                        HANDOFF_MS) == 1;
  lo.flags = TAXI_LISTEN_KEEP_SOCKET;
  lo.stream = &ad->so;
  rc = taxi_listener_adopt(&ad->acceptor, ad->io, ad->listener, &lo, on_accept,
                           ad);
  if (rc == 0 && (rc = taxi_listener_pause(ad->acceptor)) < 0) {
    taxi_listener_close(ad->acceptor);
    ad->acceptor = NULL;
  }
  if (rc == 0) return; /* adopted: the socket is non-blocking */
  ad->acceptor = NULL;
  fprintf(stderr,
          "jaws: adaptive: the proactor cannot accept on the listener (%s): "
          "the pool accepts for it\n",
          taxi_strerror(rc));
  /* jaws_sock_accept_waits made it blocking (Linux). */
  if (echo_set_nonblocking(ad->listener) != 0) {
    fprintf(stderr, "jaws: adaptive: the listener stays blocking: %s\n",
            echo_last_error());
  }
}

/* The pool's threads; how many started. */
static unsigned start_pool(struct adaptive *ad, pthread_t *threads,
                           unsigned n) {
  unsigned started = 0;
  for (; started < n; started++)
    if (jaws_thread_start(&threads[started], pool_thread, ad) != 0) break;
  return started;
}

int jaws_run_adaptive(struct jaws_server *srv,
                      const struct jaws_strategy *self) {
  struct adaptive *ad = calloc(1, sizeof *ad);
  unsigned n = srv->cfg.threads ? srv->cfg.threads : POOL_THREADS, started;
  pthread_t *threads = calloc(n, sizeof *threads);
  char bound[64], backends[64];
  unsigned port;
  taxi_time_t period;
  int rc;
  (void)self;
  if (ad == NULL || threads == NULL) {
    fprintf(stderr, "jaws: out of memory\n");
    free(ad);
    free(threads);
    return 1;
  }
  ad->srv = srv;
  adapt_policy_init(&ad->policy,
                    srv->cfg.adapt_threshold ? ADAPT_THRESHOLD : ADAPT_MEASURE,
                    srv->cfg.adapt_high, srv->cfg.adapt_low, say_stderr, NULL);
  ad->last_ms = jaws_now_ms();
  if ((rc = create_context(ad)) != 0) {
    free(ad);
    free(threads);
    return rc;
  }
  if (echo_listen(srv->cfg.host, srv->cfg.port, &ad->listener, bound,
                  sizeof bound, &port) != 0) {
    fprintf(stderr, "jaws: %s\n", echo_last_error());
    taxi_io_destroy(ad->io);
    free(ad);
    free(threads);
    return 1;
  }
  pthread_mutex_init(&ad->ctx_lock, NULL);
  pthread_mutex_init(&ad->list_lock, NULL);
  pthread_mutex_init(&ad->pool_lock, NULL);
  pthread_cond_init(&ad->pool_cond, NULL);
  ad->alive = true;
  jaws_stream_options(srv, &ad->so);
  start_acceptor(ad);
  period = (taxi_time_t)srv->cfg.header_timeout_ms * TAXI_NSEC_PER_MSEC / 5;
  if (period < 10 * TAXI_NSEC_PER_MSEC) period = 10 * TAXI_NSEC_PER_MSEC;
  if (period > TAXI_NSEC_PER_SEC) period = TAXI_NSEC_PER_SEC;
  start_timer(ad->io, on_sweep, ad, period, "header timeout");
  start_timer(ad->io, on_count, ad, COUNT_PERIOD, "connection count");
  start_timer(ad->io, on_adapt, ad, ADAPT_PERIOD, "adaptation");
  if ((started = start_pool(ad, threads, n)) < n) {
    fprintf(stderr, "jaws: cannot start %u pool threads\n", n);
    atomic_store(&srv->stopping, 1);
    rc = -1;
  } else {
    snprintf(backends, sizeof backends, "blocking+%s", taxi_io_backend(ad->io));
    jaws_print_listening(srv, backends, n, bound);
    rc = taxi_io_run(ad->io);
    if (rc == TAXI_ESTOPPED) rc = 0; /* stopped, as asked */
  }
  atomic_store(&srv->stopping, 1);
  pthread_mutex_lock(&ad->pool_lock); /* parked threads see it */
  pthread_cond_broadcast(&ad->pool_cond);
  pthread_mutex_unlock(&ad->pool_lock);
  /* The pool takes no connection any more, and moves from now on end
   * their connections (see hand_off); then the Proactor closes its own. */
  pthread_mutex_lock(&ad->ctx_lock);
  ad->alive = false;
  pthread_mutex_unlock(&ad->ctx_lock);
  for (unsigned i = 0; i < started; i++) pthread_join(threads[i], NULL);
  taxi_io_destroy(ad->io);
  /* After the timers that look at its queue, and the Proactor's listener
   * on it (ended with the context). */
  echo_close(ad->listener);
  snprintf(srv->stop_note, sizeof srv->stop_note,
           " (adaptive: %llu moves to the proactor for large responses, %llu "
           "while waiting, %llu with the socket full, %llu at accept (%llu "
           "accepted by the proactor), %llu state changes)",
           (unsigned long long)atomic_load(&ad->moves[FOR_LARGE]),
           (unsigned long long)atomic_load(&ad->moves[FOR_WAITING]),
           (unsigned long long)atomic_load(&ad->moves[FOR_FULL]),
           (unsigned long long)atomic_load(&ad->moves[AT_ACCEPT]),
           (unsigned long long)atomic_load(&ad->accepted),
           (unsigned long long)atomic_load(&ad->changes));
  pthread_mutex_destroy(&ad->ctx_lock);
  pthread_mutex_destroy(&ad->list_lock);
  pthread_mutex_destroy(&ad->pool_lock);
  pthread_cond_destroy(&ad->pool_cond);
  free(ad);
  free(threads);
  if (rc < 0) {
    if (started == n)
      fprintf(stderr, "jaws: stopped by an error: %s\n", taxi_strerror(rc));
    return 1;
  }
  return 0;
}
