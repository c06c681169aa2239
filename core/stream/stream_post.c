/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_post.c - posting a function to the context, a stream or
 * a listener, to run in its context (taxi_io_post, taxi_stream_post,
 * taxi_listener_post).  Their queues are run, or cancelled, by
 * core/stream/post.c's functions, which the context's wake-up, a stream's
 * round and the driver call; this file calls the records (post.c), the
 * wake-up (io_run.c: taxi__io_kick) and the state machine (stream.c: a
 * round asked for), and the driver through its table.
 *
 * The context's posts run where its wake-up is read, so each post sends
 * the wake-up (unless one is on its way already).
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

/* ---- the context ----------------------------------------------------------
 */

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

/* ---- streams --------------------------------------------------------------
 */

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
  int rc = taxi__stream_lock_open(s, "taxi_stream_post");
  if (rc < 0) {
    taxi__post_put(io, p);
    return taxi__refuse(rc, "taxi_stream_post: s: closing or closed");
  }
  taxi__post_push(&s->posts, p);
  taxi__stream_request_locked(s);
  taxi__stream_unlock(s);
  return 0;
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
