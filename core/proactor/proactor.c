/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor.c - layer 4, the life cycle: creating and
 * destroying a proactor, attaching, detaching and closing handles,
 * cancellation, counters, and giving back pooled buffers.  Starting
 * operations lives beside it in proactor_start.c.
 *
 * It calls the loop (proactor_dispatch.c), the completion layer and the
 * table (see the layering in core/proactor/proactor_impl.h).  What is made
 * later than the proactor and must go with it (the signal catcher of
 * proactor_signal.c, above this layer) registers a teardown hook that
 * destroy runs, rather than destroy calling it.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/common/options.h"
#include "core/proactor/proactor_backends.h"

#include <stdio.h>
#include <string.h>

/* ---- records ------------------------------------------------------------ */

void taxi_op_init(taxi_op_t *op) {
  if (!op) return;
  memset(op, 0, sizeof *op);
  op->handle = TAXI_INVALID_HANDLE;
  op->accepted = TAXI_INVALID_HANDLE;
}

taxi_proactor_t *taxi_op_proactor(const taxi_op_t *op) {
  return op ? op->internal_.proactor : NULL;
}

int taxi_op_in_flight(const taxi_op_t *op) {
  return op && (taxi__op_state_load(op) & TAXI__OP_STATE) != TAXI__OP_IDLE;
}

/* ---- creation ----------------------------------------------------------- */

void taxi_proactor_options_init(taxi_proactor_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_proactor_create(taxi_proactor_t **out,
                         const taxi_proactor_options_t *opts) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_proactor_create: out: NULL");
  *out = NULL;
  taxi_proactor_options_t o;
  taxi_proactor_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_proactor_create: options",
                         "taxi_proactor_options_init") < 0)
    return TAXI_EINVAL;
  unsigned known = TAXI_PROACTOR_ONE_THREAD | TAXI_PROACTOR_NO_DEFER_TASKRUN |
                   TAXI_PROACTOR_NO_REGISTERED_FILES;
  if (o.flags & ~known)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_proactor_create: options.flags: unknown bits "
                        "0x%x (TAXI_PROACTOR_* are 0x%x)",
                        o.flags & ~known, known);
  if (taxi__pbufs_check(&o) < 0) return TAXI_EINVAL;

  taxi_proactor_t *p = taxi__calloc(1, sizeof *p);
  if (!p) return TAXI_ENOMEM;
  int rc = TAXI_ENOMEM;
  p->max_events = TAXI__PROACTOR_MAX_EVENTS;
  p->on_error = o.on_error;
  p->on_error_arg = o.on_error_arg;
  p->flags = o.flags;
  p->wait_buf = taxi__calloc(p->max_events, sizeof *p->wait_buf);
  if (!p->wait_buf) goto fail_free;
  /* The multishot backlog's first ring, made now: the first accept
   * completion that finds the handler of the one before still running
   * (late under load, or taken by a pool's other thread) may come at any
   * time, and must not allocate on the dispatch path then.  It grows only
   * under a burst. */
  p->backlog.cap = TAXI__BACKLOG_FIRST;
  p->backlog.items = taxi__calloc(p->backlog.cap, sizeof *p->backlog.items);
  if (!p->backlog.items) goto fail_free;
  rc = taxi__mutex_init(&p->lock);
  if (rc < 0) goto fail_free;
  atomic_init(&p->counters.syscalls, 0);
  atomic_init(&p->counters.waits, 0);
  atomic_init(&p->counters.enters, 0);
  atomic_init(&p->counters.sqes, 0);
  atomic_init(&p->counters.cqes, 0);
  atomic_init(&p->counters.files_registered, 0);
  atomic_init(&p->counters.files_failed, 0);
  atomic_init(&p->stopped, false);
  rc = taxi__proactor_backend_open(o.backend, &o, &p->counters, &p->ops,
                                   &p->backend);
  if (rc == TAXI_ENOBACKEND)
    taxi__refuse(rc,
                 "taxi_proactor_create: options.backend: \"%s\" is not a "
                 "completion backend compiled in that works here (see "
                 "taxi_proactor_backend_names)",
                 o.backend ? o.backend : "(NULL: TAXI_PROACTOR or any)");
  else if (rc == TAXI_ENOTSUP || rc == TAXI_EPERM)
    taxi__refuse(rc,
                 "taxi_proactor_create: options.backend: the system refuses "
                 "\"%s\" (taxi_last_os_error() tells why)",
                 o.backend ? o.backend : "(NULL: TAXI_PROACTOR)");
  if (rc < 0) goto fail_mutex;
  const char *under =
      p->ops->reactor_backend ? p->ops->reactor_backend(p->backend) : NULL;
  snprintf(p->name, sizeof p->name, under ? "%s:%s" : "%s", p->ops->name,
           under);
  p->free_head = TAXI__ROW_NIL;
  p->due_head = p->due_tail = TAXI__ROW_NIL;
  taxi__handle_map_init(&p->map);
  taxi__timer_heap_init(&p->timers, &taxi__proactor_timer_ops);
  rc = taxi__pbufs_open(p, &o);
  if (rc < 0) goto fail_backend;
  taxi__pgroups_open(p);
  *out = p;
  return 0;

fail_backend:
  p->ops->close(p->backend);
  taxi__pbufs_close(p);
  taxi__handle_map_destroy(&p->map);
  taxi__timer_heap_destroy(&p->timers);

fail_mutex:
  taxi__mutex_destroy(&p->lock);
fail_free:
  taxi__free(p->backlog.items);
  taxi__free(p->wait_buf);
  taxi__free(p);
  return rc;
}

const char *taxi_proactor_backend(const taxi_proactor_t *p) {
  return p ? p->name : NULL;
}

int taxi_proactor_features(const taxi_proactor_t *p, unsigned *out) {
  if (!p || !out) return TAXI_EINVAL;
  unsigned f = p->ops->features ? p->ops->features(p->backend) : 0;
  if (p->flags & TAXI_PROACTOR_ONE_THREAD) f |= TAXI_PFEAT_ONE_THREAD;
  *out = f;
  return 0;
}

/* ---- the table of handles ----------------------------------------------- */

int taxi_proactor_attach(taxi_proactor_t *p, taxi_handle_t h) {
  if (!p || h == TAXI_INVALID_HANDLE) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  int rc = p->destroying ? TAXI_ESTOPPED : taxi__proactor_attach_locked(p, h);
  taxi__mutex_unlock(&p->lock);
  return rc;
}

/* Ask for the cancellation of the ops of one direction of a closing
 * handle: the head through the backend, the waiting ones by flag (they
 * complete with TAXI_ECANCELED, in order, when the head has completed). */
static void cancel_dir_locked(taxi_proactor_t *p, taxi__pdir_t *d) {
  taxi_op_t *cur = d->cur;
  if (cur) {
    unsigned st = cur->internal_.state;
    taxi__op_state_store(cur, st | TAXI__OP_CANCEL);
    if ((st & TAXI__OP_INBACKEND) && !(st & TAXI__OP_CANCEL))
      p->ops->cancel(p->backend, cur);
  }
  for (taxi_op_t *op = d->wait.head; op; op = op->internal_.next)
    taxi__op_state_store(op, op->internal_.state | TAXI__OP_CANCEL);
}

int taxi__proactor_forget_locked(taxi_proactor_t *p, taxi_handle_t h,
                                 bool close_it) {
  uint32_t row;
  if (taxi__handle_map_get(&p->map, h, &row) < 0) return TAXI_ENOENT;
  taxi__handle_map_del(&p->map, h);
  taxi__prow_t *r = &p->rows[row];
  /* A pausing accept is with no backend: it ends now, and those queued
   * behind it with it (flagged first, so that none is submitted). */
  for (unsigned di = 0; di < 2; di++) {
    taxi_op_t *cur = r->dir[di].cur;
    if (!cur || taxi__op_phase(cur) != TAXI__OP_PAUSED) continue;
    for (taxi_op_t *op = r->dir[di].wait.head; op; op = op->internal_.next)
      taxi__op_state_store(op, op->internal_.state | TAXI__OP_CANCEL);
    taxi__proactor_unpause_locked(p, cur);
    taxi__proactor_complete_locked(p, cur, TAXI_ECANCELED);
    /* Its queue ends now too, before the row turns zombie. */
    taxi__proactor_follow_ons_locked(p);
  }
  r = &p->rows[row];
  r->zombie = true;
  cancel_dir_locked(p, &r->dir[0]);
  cancel_dir_locked(p, &r->dir[1]);
  p->ops->detach(p->backend, h);
  /* The heads still owe their completions; the row waits for them (see
   * taxi__proactor_complete_locked), unless there are none, and so does
   * the close (see core/proactor/proactor_impl.h: the number must not be reused
   * while a request of the backend may name it). */
  r->close_pending = close_it;
  if (!r->dir[0].cur && !r->dir[1].cur)
    taxi__proactor_row_release_locked(p, row);
  taxi__proactor_kick_locked(p);
  return 0;
}

static int forget(taxi_proactor_t *p, taxi_handle_t h, bool close_it) {
  if (!p) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  int rc = taxi__proactor_forget_locked(p, h, close_it);
  taxi__mutex_unlock(&p->lock);
  return rc;
}

int taxi_proactor_close(taxi_proactor_t *p, taxi_handle_t h) {
  return forget(p, h, true);
}

int taxi_proactor_detach(taxi_proactor_t *p, taxi_handle_t h) {
  return forget(p, h, false);
}

/* ---- cancellation ------------------------------------------------------- */

/* Remove a QUEUED op from the waiting list of its handle. */
static void unlink_waiting_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__prow_t *r = &p->rows[op->internal_.heap_index];
  taxi__opq_t *q = &r->dir[op->internal_.dir - 1].wait;
  taxi_op_t *prev = NULL;
  for (taxi_op_t *o = q->head; o; prev = o, o = o->internal_.next) {
    if (o != op) continue;
    if (prev)
      prev->internal_.next = o->internal_.next;
    else
      q->head = o->internal_.next;
    if (q->tail == o) q->tail = prev;
    o->internal_.next = NULL;
    return;
  }
}

static int cancel_locked(taxi_proactor_t *p, taxi_op_t *op) {
  unsigned st = op->internal_.state;
  if (op->internal_.proactor != p || (st & TAXI__OP_STATE) == TAXI__OP_IDLE)
    return TAXI_ENOENT;
  if (st & TAXI__OP_CANCEL) return 0; /* asked already */
  switch (st & TAXI__OP_STATE) {
    case TAXI__OP_QUEUED:
      /* Never reached the OS: complete it now. */
      unlink_waiting_locked(p, op);
      op->internal_.heap_index = TAXI__NO_ROW;
      op->internal_.dir = TAXI__DIR_NONE;
      taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
      break;
    case TAXI__OP_TIMER:
      taxi__proactor_timer_remove_locked(p, op);
      taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
      break;
    case TAXI__OP_PAUSED:
      /* Not with the backend: end it now. */
      taxi__proactor_unpause_locked(p, op);
      taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
      break;
    case TAXI__OP_SUBMITTED:
      taxi__op_state_store(op, st | TAXI__OP_CANCEL);
      p->ops->cancel(p->backend, op);
      break;
    default:
      /* READY or TAKEN: its result is in.  Only a multishot accept goes
       * on afterwards; the flag ends it after this delivery. */
      if (st & TAXI__OP_MORE) {
        taxi__op_state_store(op, st | TAXI__OP_CANCEL);
        if (st & TAXI__OP_INBACKEND) p->ops->cancel(p->backend, op);
      }
      break;
  }
  taxi__proactor_follow_ons_locked(p);
  taxi__proactor_kick_locked(p);
  return 0;
}

int taxi_proactor_cancel(taxi_proactor_t *p, taxi_op_t *op) {
  if (!p || !op) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  int rc = cancel_locked(p, op);
  taxi__mutex_unlock(&p->lock);
  return rc;
}

/* ---- counters ----------------------------------------------------------- */

int taxi_proactor_stats(const taxi_proactor_t *cp, taxi_proactor_stats_t *out) {
  /* Reading takes the lock, which does not change what the proactor is:
   * const is cast away for it alone. */
  taxi_proactor_t *p = (taxi_proactor_t *)(uintptr_t)cp;
  if (!p || !out) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  *out = p->stats;
  /* The pool's and the datagram groups' together. */
  for (unsigned g = 0; g < TAXI__BUF_GROUPS; g++) {
    const taxi__pbufs_t *b = g == 0 ? p->bufs : p->dgroups[g];
    if (!b) continue;
    out->buffers += b->count;
    out->buffers_held += b->nheld;
  }
  out->handles = p->map.count; /* attached: zombie rows are not in the map */
  taxi__mutex_unlock(&p->lock);
  out->syscalls =
      atomic_load_explicit(&p->counters.syscalls, memory_order_relaxed);
  out->waits = atomic_load_explicit(&p->counters.waits, memory_order_relaxed);
  out->ring_enters =
      atomic_load_explicit(&p->counters.enters, memory_order_relaxed);
  out->sqes = atomic_load_explicit(&p->counters.sqes, memory_order_relaxed);
  out->cqes = atomic_load_explicit(&p->counters.cqes, memory_order_relaxed);
  out->registered_handles =
      atomic_load_explicit(&p->counters.files_registered, memory_order_relaxed);
  out->register_failures =
      atomic_load_explicit(&p->counters.files_failed, memory_order_relaxed);
  return 0;
}

/* ---- pooled buffers ---------------------------------------------------- */

int taxi_proactor_buffer_release(taxi_proactor_t *p, void *data) {
  if (!p || !data) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  bool wake = false;
  int rc = taxi__pbufs_release_locked(p, data, &wake);
  /* A read waiting for a buffer may go on: the waiting threads look. */
  if (wake) taxi__proactor_kick_locked(p);
  taxi__mutex_unlock(&p->lock);
  return rc;
}

/* ---- destruction -------------------------------------------------------- */

/* Forget every handle still attached, closing it. */
static void close_all_locked(taxi_proactor_t *p) {
  for (uint32_t i = 0; i < p->nrows; i++) {
    taxi__prow_t *r = &p->rows[i];
    if (r->used && !r->zombie) taxi__proactor_forget_locked(p, r->handle, true);
  }
}

int taxi_proactor_destroy(taxi_proactor_t *p) {
  if (!p) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  if (p->has_owner || p->pool || p->destroying ||
      taxi__proactor_in_handler(p)) {
    const char *why = p->destroying ? "another thread is destroying it"
                      : p->pool     ? "a Leader/Followers pool dispatches it: "
                                      "destroy the pool first"
                      : p->has_owner
                          ? "a thread is dispatching it (or this is one of "
                            "its completion handlers): stop it and let it "
                            "return first"
                          : "called from one of its completion handlers";
    taxi__mutex_unlock(&p->lock);
    return taxi__refuse(TAXI_EBUSY, "taxi_proactor_destroy: p: %s", why);
  }
  p->destroying = true;
  p->has_owner = true;
  p->owner = taxi__thread_self();
  /* What was made later (the signal catcher, whose thread posts to the
   * proactor) stops before it drains (posts are refused from now on). */
  const taxi__proactor_teardown_t *teardown = p->teardown;
  taxi__mutex_unlock(&p->lock);
  if (teardown) teardown->stop(p);
  taxi__mutex_lock(&p->lock);
  close_all_locked(p);
  taxi__proactor_drain_locked(p);
  /* Connections accepted while draining were attached after the first
   * pass; their handlers have run, so close them now. */
  close_all_locked(p);
  taxi__proactor_drain_locked(p);
  taxi__mutex_unlock(&p->lock);

  p->ops->close(p->backend);
  taxi__pbufs_close(p); /* after the backend: the kernel may point into it */
  if (teardown) teardown->release(p);
  taxi__handle_map_destroy(&p->map);
  taxi__mutex_destroy(&p->lock);
  taxi__free(p->rows);
  taxi__timer_heap_destroy(&p->timers);
  taxi__free(p->backlog.items);
  taxi__free(p->wait_buf);
  taxi__free(p);
  return 0;
}
