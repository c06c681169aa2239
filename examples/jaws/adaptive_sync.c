/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/adaptive_sync.c - the adaptive strategy's SYNC side (see
 * strategy_adaptive.c): a connection's life and responses, the pool's
 * threads, and the moves of connections to ASYNC.
 */
#include "adaptive.h"

void adaptive_conn_unref(struct conn *c) {
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
  adaptive_conn_unref(c);
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
    jaws_stream_settle(&c->sc, adaptive_on_read,
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
void adaptive_become_async(struct conn *c, taxi_stream_t *s) {
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
  adaptive_become_async(c, s);
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
  jaws_stream_settle(&c->sc, adaptive_on_read,
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
struct conn *adaptive_conn_new(struct adaptive *ad, const char *peer) {
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
  if ((c = adaptive_conn_new(ad, peer)) == NULL) {
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

void *adaptive_pool_thread(void *arg) {
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
