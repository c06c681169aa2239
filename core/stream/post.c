/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/post.c - the records of posted functions, and the functions
 * posted to the context itself (taxi_io_post).
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
 * a signal callback runs (core/stream/io.c): they never overlap.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
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

/* Take p out of io's queue if it is still there: whether it was. */
static bool unpost(taxi_io_t *io, taxi__post_t *p) {
  taxi__mutex_lock(&io->post_lock);
  taxi__post_t **at = &io->posts.head, *prev = NULL;
  while (*at && *at != p) {
    prev = *at;
    at = &(*at)->next;
  }
  bool found = *at == p;
  if (found) {
    *at = p->next;
    if (io->posts.tail == p) io->posts.tail = prev;
  }
  taxi__mutex_unlock(&io->post_lock);
  return found;
}

int taxi_io_post(taxi_io_t *io, taxi_io_post_fn fn, void *arg) {
  if (!io || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_io_post: %s: NULL",
                        !io ? "io" : "fn");
  if (taxi__io_stopping(io))
    return taxi__refuse(TAXI_ESTOPPED,
                        "taxi_io_post: io: stopped, or being destroyed");
  taxi__post_t *p = taxi__post_get(io);
  if (!p) return TAXI_ENOMEM;
  p->fn.io = fn;
  p->arg = arg;
  taxi__mutex_lock(&io->post_lock);
  taxi__post_push(&io->posts, p);
  taxi__mutex_unlock(&io->post_lock);
  int rc = taxi__io_kick(io);
  /* No wake-up went out (the OS out of buffers): unless a run triggered
   * by an earlier post took it already, fn would wait for the next one. */
  if (rc < 0 && unpost(io, p)) {
    taxi__post_put(io, p);
    return rc;
  }
  return 0;
}

void taxi__io_post_record(taxi_io_t *io, taxi__post_t *p, taxi_io_post_fn fn,
                          void *arg) {
  p->fn.io = fn;
  p->arg = arg;
  taxi__mutex_lock(&io->post_lock);
  taxi__post_push(&io->posts, p);
  taxi__mutex_unlock(&io->post_lock);
  /* A failed wake-up (the OS out of buffers) leaves the record queued:
   * the next wake-up runs it, or taxi_io_destroy does; the caller has no
   * better way to deliver it. */
  (void)taxi__io_kick(io);
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
