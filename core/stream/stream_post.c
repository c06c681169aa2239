/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_post.c - functions posted to a stream or a listener, run
 * in its context (taxi_stream_post, taxi_listener_post).
 *
 * A stream's posts wait in its queue, under its lock, and run in its
 * processing rounds (core/stream/stream.c) as its callbacks do: the round that
 * runs them is the stream's serialisation, so nothing more is needed.  A
 * post asks for a round as a write from another thread does.
 *
 * A listener has no such round: its accept callbacks run in the driver's
 * hooks (a reactor's input hook, a proactor's accept completions), which
 * a run of its posts (a timer of its handler, a posted operation: the
 * driver's listener_post) may meet in another thread.  The listener's
 * cb_lock, held around each accept callback and each posted function,
 * keeps them apart.  The driver's run is one its release waits for, so
 * the listener outlives it; posts still queued at the release are told
 * TAXI_ECANCELED then.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/io_impl.h"

int taxi_stream_post(taxi_stream_t *s, taxi_stream_post_fn fn, void *arg) {
  if (!s || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_stream_post: %s: NULL",
                        !s ? "s" : "fn");
  taxi_io_t *io = s->io;
  if (taxi__io_stopping(io))
    return taxi__refuse(TAXI_ESTOPPED,
                        "taxi_stream_post: s: its context is stopped, or "
                        "being destroyed");
  taxi__post_t *p = taxi__post_get(io);
  if (!p) return TAXI_ENOMEM;
  p->fn.s = fn;
  p->arg = arg;
  int rc = taxi__stream_lock_open(s);
  if (rc < 0) {
    taxi__post_put(io, p);
    return taxi__refuse(rc, "taxi_stream_post: s: closing or closed");
  }
  taxi__post_push(&s->posts, p);
  taxi__stream_request_locked(s);
  taxi__mutex_unlock(&s->lock);
  return 0;
}

void taxi__stream_posts_locked(taxi_stream_t *s) {
  taxi_io_t *io = s->io;
  /* Those queued when the round began: a post made by one of these runs
   * waits for the next round, so that posting in a loop cannot keep the
   * thread here. */
  taxi__post_t *last = s->posts.tail;
  while (last && !(s->flags & TAXI__S_CLOSE_REQ)) {
    taxi__post_t *p = taxi__post_pop(&s->posts);
    taxi_stream_post_fn fn = p->fn.s;
    void *arg = p->arg;
    bool end = p == last;
    taxi__mutex_unlock(&s->lock);
    taxi__post_put(io, p);
    fn(s, 0, arg);
    taxi__mutex_lock(&s->lock);
    if (end) break;
  }
}

void taxi__stream_posts_cancel_locked(taxi_stream_t *s) {
  taxi__post_t *p;
  /* Nothing is added meanwhile: the stream is closing, and refuses. */
  while ((p = taxi__post_pop(&s->posts))) {
    taxi_stream_post_fn fn = p->fn.s;
    void *arg = p->arg;
    taxi__mutex_unlock(&s->lock);
    taxi__post_put(s->io, p);
    fn(s, TAXI_ECANCELED, arg);
    taxi__mutex_lock(&s->lock);
  }
}

/* ---- listeners ------------------------------------------------------------
 */

int taxi_listener_post(taxi_listener_t *l, taxi_listener_post_fn fn,
                       void *arg) {
  if (!l || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_listener_post: %s: NULL",
                        !l ? "l" : "fn");
  taxi_io_t *io = l->io;
  if (taxi__io_stopping(io))
    return taxi__refuse(TAXI_ESTOPPED,
                        "taxi_listener_post: l: its context is stopped, or "
                        "being destroyed");
  taxi__post_t *p = taxi__post_get(io);
  if (!p) return TAXI_ENOMEM;
  p->fn.l = fn;
  p->arg = arg;
  int rc = 0;
  taxi__mutex_lock(&l->lock);
  if (l->closing) {
    rc = taxi__refuse(TAXI_EBADF, "taxi_listener_post: l: closed");
  } else if (!l->post_kicked) {
    /* Under the lock, so that a close cannot come between: the run is
     * then one the release waits for, or is cancelled with the rest. */
    rc = io->drv->listener_post(l);
    if (rc == 0) l->post_kicked = true;
  }
  if (rc == 0) taxi__post_push(&l->posts, p);
  taxi__mutex_unlock(&l->lock);
  if (rc < 0) taxi__post_put(io, p);
  return rc;
}

void taxi__listener_run_posts(taxi_listener_t *l) {
  taxi__mutex_lock(&l->cb_lock);
  taxi__mutex_lock(&l->lock);
  l->post_kicked = false; /* a post from now on asks for another run */
  taxi__post_t *last = l->posts.tail;
  while (last && !l->closing) {
    taxi__post_t *p = taxi__post_pop(&l->posts);
    taxi_listener_post_fn fn = p->fn.l;
    void *arg = p->arg;
    bool end = p == last;
    taxi__mutex_unlock(&l->lock);
    taxi__post_put(l->io, p);
    fn(l, 0, arg);
    taxi__mutex_lock(&l->lock);
    if (end) break;
  }
  taxi__mutex_unlock(&l->lock);
  taxi__mutex_unlock(&l->cb_lock);
}
