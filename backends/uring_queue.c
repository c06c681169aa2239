/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_queue.c - the io_uring backend's two waiting lists: the
 * backlog of steps that found no SQE (the SQ full, the kernel refusing),
 * which every wait retries, and the completions produced with no room to
 * return them (or outside a wait), which the next wait returns first.
 * Lock held throughout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* cpu_set_t in liburing.h */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

/* ---- lists: backlog and deferred completions ----------------------------- */

void uring_backlog_add(uring_state_t *s, taxi_op_t *op, unsigned need) {
  uring_op_t *u = uop(op);
  if (!(u->state & (UOP_NEED_STEP | UOP_NEED_CANCEL))) {
    u->bl_next = NULL;
    if (s->backlog_tail)
      uop(s->backlog_tail)->bl_next = op;
    else
      s->backlog = op;
    s->backlog_tail = op;
  }
  u->state |= need;
}

/* From submit or cancel: a waiter blocked in the kernel would not look at
 * the backlog before some completion arrives, so wake it (a wake-up needs
 * no SQE); it retries the backlog every URING_BACKLOG_RETRY_NS from then
 * on. */
void uring_backlog_add_kick(uring_state_t *s, taxi_op_t *op, unsigned need) {
  uring_backlog_add(s, op, need);
  if (s->in_wait > 0) uring_wake_now(s);
}

void uring_backlog_remove(uring_state_t *s, taxi_op_t *op) {
  taxi_op_t **pp = &s->backlog, *prev = NULL;
  while (*pp && *pp != op) {
    prev = *pp;
    pp = &uop(*pp)->bl_next;
  }
  if (!*pp) return;
  *pp = uop(op)->bl_next;
  if (s->backlog_tail == op) s->backlog_tail = prev;
  uop(op)->state &= ~(UOP_NEED_STEP | UOP_NEED_CANCEL);
}

void uring_emit(uring_state_t *s, sink_t *k, taxi_op_t *op, int64_t result,
                unsigned flags) {
  uring_op_t *u = uop(op);
  if (!(flags & TAXI__CQ_MORE)) {
    u->state &= ~UOP_INFLIGHT;
    /* The record may be reused once this is reported: off every list. */
    if (u->state & (UOP_NEED_STEP | UOP_NEED_CANCEL))
      uring_backlog_remove(s, op);
  }
  if (k && k->n < k->max && !(u->state & UOP_DEFERRED)) {
    k->out[k->n].op = op;
    k->out[k->n].result = result;
    k->out[k->n].flags = flags;
    k->n++;
    return;
  }
  /* No room, or produced outside wait (cancel): keep it for the next wait.
   * A record holds two at most.  wait() empties this list before it looks
   * at any CQE, and looks at a CQE only with room for one completion, so a
   * CQE adds at most one here (the second of a connection plus the final
   * completion of a cancelled multishot accept); cancel() adds at most the
   * final one, after at most one connection. */
  if (!(u->state & UOP_DEFERRED)) {
    u->ndef = 0;
    u->state |= UOP_DEFERRED;
    u->def_next = NULL;
    if (s->deferred_tail)
      uop(s->deferred_tail)->def_next = op;
    else
      s->deferred = op;
    s->deferred_tail = op;
  }
  if (u->ndef < 2) {
    u->def_result[u->ndef] = result;
    u->def_flags[u->ndef] = flags;
    u->ndef++;
  }
}

void uring_deferred_drain(uring_state_t *s, sink_t *k) {
  while (s->deferred && k->n < k->max) {
    taxi_op_t *op = s->deferred;
    uring_op_t *u = uop(op);
    k->out[k->n].op = op;
    k->out[k->n].result = u->def_result[0];
    k->out[k->n].flags = u->def_flags[0];
    k->n++;
    if (--u->ndef > 0) {
      u->def_result[0] = u->def_result[1];
      u->def_flags[0] = u->def_flags[1];
      continue;
    }
    s->deferred = u->def_next;
    if (!s->deferred) s->deferred_tail = NULL;
    u->state &= ~UOP_DEFERRED;
  }
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_queue_absent;
#endif /* TAXI_HAVE_URING */
