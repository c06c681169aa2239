/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/post.c - the records of posted functions, and running (or
 * cancelling) the queues of the context, a stream and a listener.  Posting
 * is core/stream/stream_post.c's; this file calls nothing of the wing, so
 * that whoever runs a queue (the context's wake-up, a stream's round, a
 * driver's run of a listener's posts) may call it.
 *
 * A post needs a record until its function has run.  The context keeps
 * the records that are free on a list and allocates one only when the
 * list is empty, so that a program that posts at a steady rate stops
 * allocating once it has as many as it keeps in flight; they are freed by
 * taxi_io_destroy.  The list has a lock of its own, held for a push or a
 * pop only.
 *
 * The context's own posts run where its wake-up is read (taxi__io_woken:
 * taxi_io_stop's socket pair, which every driver watches), so that they
 * need nothing of the drivers.  cb_lock is held while one runs, and while
 * a signal callback runs (core/stream/io_signal.c): they never overlap.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/io_impl.h"

taxi__post_t *taxi__post_get(taxi_io_t *io) {
  taxi__mutex_lock(&io->post_lock);
  taxi__post_t *p = io->post_free;
  if (p) io->post_free = p->next;
  taxi__mutex_unlock(&io->post_lock);
  if (!p) p = taxi__malloc(sizeof *p);
  if (p) p->next = NULL;
  return p;
}

void taxi__post_put(taxi_io_t *io, taxi__post_t *p) {
  taxi__mutex_lock(&io->post_lock);
  p->next = io->post_free;
  io->post_free = p;
  taxi__mutex_unlock(&io->post_lock);
}

void taxi__post_push(taxi__post_queue_t *q, taxi__post_t *p) {
  p->next = NULL;
  if (q->tail)
    q->tail->next = p;
  else
    q->head = p;
  q->tail = p;
}

taxi__post_t *taxi__post_pop(taxi__post_queue_t *q) {
  taxi__post_t *p = q->head;
  if (!p) return NULL;
  q->head = p->next;
  if (!q->head) q->tail = NULL;
  p->next = NULL;
  return p;
}

bool taxi__io_stopping(taxi_io_t *io) {
  return atomic_load(&io->stop_requested) || atomic_load(&io->ending);
}

int taxi__io_posts_init(taxi_io_t *io) {
  int rc = taxi__mutex_init(&io->post_lock);
  if (rc < 0) return rc;
  rc = taxi__mutex_init(&io->cb_lock);
  if (rc < 0) taxi__mutex_destroy(&io->post_lock);
  atomic_init(&io->ending, 0);
  return rc;
}

void taxi__io_posts_run(taxi_io_t *io) {
  taxi__mutex_lock(&io->cb_lock);
  /* Those queued now: one posted by these runs has kicked the context
   * again, and waits for that round. */
  taxi__mutex_lock(&io->post_lock);
  taxi__post_t *last = io->posts.tail;
  taxi__mutex_unlock(&io->post_lock);
  while (last) {
    taxi__mutex_lock(&io->post_lock);
    taxi__post_t *p = taxi__post_pop(&io->posts);
    taxi__mutex_unlock(&io->post_lock);
    if (!p) break;
    taxi_io_post_fn fn = p->fn.io;
    void *arg = p->arg;
    bool end = p == last;
    taxi__post_put(io, p);
    fn(io, 0, arg);
    if (end) break;
  }
  taxi__mutex_unlock(&io->cb_lock);
}

void taxi__io_posts_cancel(taxi_io_t *io) {
  for (;;) {
    taxi__mutex_lock(&io->post_lock);
    taxi__post_t *p = taxi__post_pop(&io->posts);
    taxi__mutex_unlock(&io->post_lock);
    if (!p) return;
    taxi_io_post_fn fn = p->fn.io;
    void *arg = p->arg;
    taxi__post_put(io, p);
    fn(io, TAXI_ECANCELED, arg);
  }
}

void taxi__io_posts_fini(taxi_io_t *io) {
  taxi__post_t *p;
  while ((p = io->post_free)) {
    io->post_free = p->next;
    taxi__free(p);
  }
  taxi__mutex_destroy(&io->cb_lock);
  taxi__mutex_destroy(&io->post_lock);
}

/* ---- a stream's and a listener's --------------------------------------------
 */

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
    taxi__stream_unlock(s);
    taxi__post_put(io, p);
    fn(s, 0, arg);
    taxi__stream_lock(s);
    if (end) break;
  }
}

void taxi__stream_posts_cancel_locked(taxi_stream_t *s) {
  taxi__post_t *p;
  /* Nothing is added meanwhile: the stream is closing, and refuses. */
  while ((p = taxi__post_pop(&s->posts))) {
    taxi_stream_post_fn fn = p->fn.s;
    void *arg = p->arg;
    taxi__stream_unlock(s);
    taxi__post_put(s->io, p);
    fn(s, TAXI_ECANCELED, arg);
    taxi__stream_lock(s);
  }
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
