/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_dispatch.c - taking ready events and running them:
 * the take order (notifications, signals, due timers, reported handles),
 * the handler's hooks run with the lock released, what follows them
 * (re-arm in pool mode, a pending move, the events of the handler set
 * aside meanwhile), and giving back events taken but never run.
 *
 * These are the steps the reactor's own loop (core/reactor/reactor_run.c)
 * and the pools (core/pools/) call.  Calls: reactor_table.c,
 * reactor_timers.c, reactor_signal.c, reactor_serial.c,
 * reactor_closed.c, reactor_move.c, handler.c, the wake-up channel;
 * common.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "core/common/batch_clock.h"

/* Turn one reported {token, events} into an event, or false if there is
 * nothing to dispatch for it. */
static bool take_io_locked(taxi_reactor_t *r, const taxi__ready_t *rd,
                           taxi__event_t *ev) {
  uint32_t row = (uint32_t)rd->token;
  if (row == TAXI__ROW_WAKEUP) {
    if (r->wake_sticky)
      taxi__rwake_force(r); /* pass it on to the next waiter */
    else
      taxi__rwake_drain(r);
    return false;
  }
  if (row == TAXI__ROW_SIGNALS) {
    taxi__signals_read_locked(r, rd->token);
    return false;
  }
  taxi__slot_t *s = taxi__reactor_slot_for_token(r, rd->token);
  /* Closed while registered, says the wait: believed if the handle, as it
   * is now, confirms it (core/reactor/reactor_closed.c), and then taken for the
   * dispatch that tells its handler, unless a claim of it tells it. */
  if (s && (rd->events & TAXI__EV_CLOSED)) {
    bool consumed;
    if (taxi__closed_reported_locked(r, s, ev, &consumed)) return true;
    if (consumed) return false;
  }
  /* Removed, suspended (resume re-arms it), or already being processed by
   * another thread (the re-arm after its hooks reports it again).  An
   * edge-triggered handle has no re-arm to report it again: what comes
   * while it is processed is set aside below, for the thread that
   * processes it to run next (its hooks drain: nothing is lost). */
  bool edge = s && taxi__reactor_edge_flags(r, s->flags);
  if (!s || (s->flags & TAXI__S_SUSPENDED) ||
      ((s->flags & TAXI__S_BUSY) &&
       !(edge && (s->handler->internal_.serial & TAXI__SER_OWNED)))) {
    r->stats.stale++;
    return false;
  }
  /* Kept for taxi_reactor_pending_error(): the socket may no longer have
   * it to tell. */
  if ((r->ops->ext & TAXI__EXT_EVENT_ERROR) && rd->error) s->error = rd->error;
  /* The interest may have changed since the wait; hang-ups and errors are
   * always of interest. */
  uint32_t events = rd->events & (s->interest | TAXI_EV_HUP | TAXI_EV_ERR);
  if (!events) {
    r->stats.stale++;
    if (!(s->flags & TAXI__S_ARMED)) taxi__reactor_arm_or_retry_locked(r, s);
    return false;
  }
  /* Another hook of the handler runs: its thread runs this one next. */
  if (!taxi__serial_claim_locked(s->handler)) {
    taxi__serial_defer_io_locked(s, events);
    return false;
  }
  ev->kind = TAXI__EV_IO;
  ev->handler = s->handler;
  ev->handle = s->handle;
  ev->events = events;
  ev->interest = s->interest;
  ev->row = row;
  ev->generation = s->generation;
  ev->drains = edge;
  s->flags |= TAXI__S_BUSY;
  s->handler->internal_.refs++;
  return true;
}

/*
 * Pick the next thing to dispatch: notifications first (they are how other
 * threads talk to this one), then signals, expired timers, and the handles
 * the last wait reported.  `now` is the time of the last wait, so a timer
 * re-armed by its own hook waits for the next round instead of starving
 * I/O.  Returns false when nothing is ready without waiting.
 */
bool taxi__reactor_take_any_locked(taxi_reactor_t *r, taxi_time_t now,
                                   taxi__event_t *ev) {
  if (r->notes_budget && taxi__notify_queue_pop(&r->notes, &ev->note)) {
    r->notes_budget--;
    ev->kind = TAXI__EV_NOTIFY;
    ev->handler = NULL;
    return true;
  }
  if (r->sig_any_pending && taxi__signals_take_locked(r, ev)) return true;
  if (taxi__timer_due_locked(r, now) && taxi__timer_take_locked(r, now, ev))
    return true;
  while (r->pending_count) {
    taxi__ready_t rd = r->pending[r->pending_head];
    if (++r->pending_head == r->pending_cap) r->pending_head = 0; /* no `%` */
    r->pending_count--;
    if (take_io_locked(r, &rd, ev)) return true;
    /* The wake-up or signal source may have just made work ready. */
    if (r->notes_budget == 0 && r->notes.count) {
      r->notes_budget = r->notes.count;
      return taxi__reactor_take_any_locked(r, now, ev);
    }
    if (r->sig_any_pending && taxi__signals_take_locked(r, ev)) return true;
  }
  return false;
}

static int run_io_hooks(const taxi__event_t *ev) {
  taxi_handler_t *h = ev->handler;
  const taxi_handler_ops_t *ops = h->ops;
  unsigned trouble = ev->events & (TAXI_EV_HUP | TAXI_EV_ERR);
  int rc = 0;
  if ((ev->events & TAXI_EV_EXCEPT) && ops->exception)
    rc = ops->exception(h, ev->handle, ev->events);
  /* A hang-up or error goes to the hook that will notice it: the reader if
   * there is one (read returns 0 or the error), else the writer. */
  bool to_input =
      (ev->events & TAXI_EV_READ) || (trouble && (ev->interest & TAXI_EV_READ));
  bool to_output = (ev->events & TAXI_EV_WRITE) ||
                   (trouble && !(ev->interest & TAXI_EV_READ));
  if (rc >= 0 && to_input && ops->input)
    rc = ops->input(h, ev->handle, ev->events);
  if (rc >= 0 && to_output && ops->output)
    rc = ops->output(h, ev->handle, ev->events);
  return rc;
}

/* A handle's hooks returned: it may be reported again.  In pool mode it
 * was deactivated when taken and is reactivated now, unless it was
 * removed (another generation) or suspended meanwhile. */
static taxi_reactor_t *io_done_locked(taxi_reactor_t *r,
                                      const taxi__event_t *ev) {
  taxi__slot_t *s = &r->slots[ev->row];
  if (!s->handler || s->generation != ev->generation) return NULL;
  s->flags &= ~TAXI__S_BUSY;
  taxi_reactor_t *move_to = s->move_to;
  s->move_to = NULL;
  /* A handle about to move is re-armed on its new reactor instead. */
  if (!move_to && r->pool && !(s->flags & TAXI__S_ARMED))
    taxi__reactor_arm_or_retry_locked(r, s);
  return move_to;
}

/* Whether a taken event may still run.  Between take and run (in the
 * half-sync/half-async pool's queue) its handle may have been removed,
 * suspended or given other interest, its timer cancelled or moved, its
 * signal removed: those calls promise that no hook starts afterwards. */
static bool still_live_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return true;
    case TAXI__EV_IO: {
      const taxi__slot_t *s = &r->slots[ev->row];
      if (s->handler != ev->handler || s->generation != ev->generation ||
          (s->flags & TAXI__S_SUSPENDED))
        return false;
      ev->events &= s->interest | TAXI_EV_HUP | TAXI_EV_ERR;
      ev->interest = s->interest;
      return ev->events != 0;
    }
    case TAXI__EV_TIMER:
      return taxi__timer_firing(ev->timer, ev->timer_seq) &&
             ev->timer->internal_.handler == ev->handler;
    case TAXI__EV_SIGNAL:
      return ev->signo < r->sig_limit &&
             r->sig_handlers[ev->signo] == ev->handler;
  }
  return true;
}

/* Drop a dispatch's reference to h, or hand it to a move asked for while
 * the dispatch went on (a removal meanwhile cancels the move): `move_to`,
 * the one a handle's hooks returned to, or one that waited for the end of
 * h's claim (a timer or signal hook of h ran when it was asked for). */
static void release_dispatch_locked(taxi_reactor_t *r, taxi_handler_t *h,
                                    taxi_reactor_t *move_to) {
  if (!move_to && !(h->internal_.serial & TAXI__SER_OWNED)) {
    taxi__slot_t *s = taxi__reactor_slot_of(r, h);
    if (s && s->move_to && !(s->flags & TAXI__S_BUSY)) {
      move_to = s->move_to;
      s->move_to = NULL;
    }
  }
  if (move_to && taxi__reactor_attached_here(r, h))
    taxi__reactor_move_locked(r, h, move_to);
  else
    taxi__handler_release_locked(r, h);
}

/* ev's dispatch is over.  First the handler's claim passes to the next of
 * its events set aside meanwhile, if any: put in *next, and true returned;
 * then ev's reference goes (release_dispatch_locked). */
static bool finish_locked(taxi_reactor_t *r, const taxi__event_t *ev,
                          taxi_reactor_t *move_to, taxi__event_t *next) {
  bool more = taxi__serial_next_locked(r, ev->handler, ev->kind, next);
  /* The claim ended: a removal for a closed handle made meanwhile tells
   * the handler now (core/reactor/reactor_closed.c). */
  if (!more) taxi__closed_claim_end_locked(r, ev->handler);
  release_dispatch_locked(r, ev->handler, move_to);
  return more;
}

/* Run ev, or drop it if it is no longer live; 1 if it ran.  If its
 * handler has an event set aside, that event replaces *ev and *more is
 * set. */
static unsigned run_one_locked(taxi_reactor_t *r, taxi__event_t *ev,
                               int (*hook)(taxi_handler_t *h,
                                           taxi_handle_t handle,
                                           unsigned events, void *arg),
                               void *arg, bool *more) {
  int rc = 0;
  taxi__event_t next;
  *more = false;
  if (!still_live_locked(r, ev)) {
    taxi_reactor_t *move_to = NULL;
    if (ev->kind == TAXI__EV_IO) {
      r->stats.stale++;
      move_to = io_done_locked(r, ev);
    }
    if (finish_locked(r, ev, move_to, &next)) {
      *ev = next;
      *more = true;
    }
    return 0;
  }
  taxi__mutex_unlock(&r->lock);
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      ev->note.fn(ev->note.arg);
      break;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      break;
    case TAXI__EV_IO:
      rc = hook ? hook(ev->handler, ev->handle, ev->events, arg)
                : run_io_hooks(ev);
      break;
    case TAXI__EV_TIMER:
      rc = ev->handler->ops->timeout(ev->handler, ev->timer, ev->act);
      break;
    case TAXI__EV_SIGNAL:
      rc = ev->handler->ops->signal(ev->handler, ev->signo);
      break;
  }
  taxi__mutex_lock(&r->lock);
  taxi_reactor_t *move_to = NULL;
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      r->stats.notifications++;
      taxi__notify_queue_done(&r->notes);
      return 1;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return 0;
    case TAXI__EV_IO:
      r->stats.events++;
      /* A hook that asked for removal is removed, closed handle or not. */
      if (rc >= 0) taxi__closed_hooks_ran_locked(r, ev);
      move_to = io_done_locked(r, ev);
      break;
    case TAXI__EV_TIMER:
      r->stats.timers++;
      taxi__timer_fired_locked(r, ev->timer, ev->timer_seq, rc);
      rc = 0; /* a timer hook's refusal cancels only that timer */
      break;
    case TAXI__EV_SIGNAL:
      r->stats.signals++;
      break;
  }
  if (rc < 0) taxi__reactor_detach_locked(r, ev->handler);
  if (finish_locked(r, ev, move_to, &next)) {
    *ev = next;
    *more = true;
  }
  return 1;
}

unsigned taxi__reactor_run_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  return taxi__reactor_run_hook_locked(r, ev, NULL, NULL);
}

unsigned taxi__reactor_run_hook_locked(taxi_reactor_t *r, taxi__event_t *ev,
                                       int (*hook)(taxi_handler_t *h,
                                                   taxi_handle_t handle,
                                                   unsigned events, void *arg),
                                       void *arg) {
  bool more;
  /* The hooks read the batch's time, not the clock (before any wait, the
   * clock's: a notification taken at once). */
  taxi_time_t outer =
      taxi__batch_enter(r->batch_now > 0 ? r->batch_now : taxi_now());
  unsigned ran = run_one_locked(r, ev, hook, arg, &more);
  /* The handler's events that came while it ran
   * (core/reactor/reactor_serial.c): this thread runs them now, with the
   * handler's own hooks. */
  while (more) ran += run_one_locked(r, ev, NULL, NULL, &more);
  taxi__batch_leave(outer);
  return ran;
}

static void untake_one_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  switch (ev->kind) {
    case TAXI__EV_NOTIFY:
      taxi__notify_queue_unpop(&r->notes, ev->note);
      return;
    case TAXI__EV_COMPLETION: /* a proactor's; never taken here */
      return;
    case TAXI__EV_IO:
      release_dispatch_locked(r, ev->handler, io_done_locked(r, ev));
      return;
    case TAXI__EV_TIMER:
      taxi__timer_untake_locked(r, ev);
      break;
    case TAXI__EV_SIGNAL:
      if (ev->signo < r->sig_limit &&
          r->sig_handlers[ev->signo] == ev->handler) {
        r->sig_pending[ev->signo] = 1;
        r->sig_any_pending = true;
      }
      break;
  }
  release_dispatch_locked(r, ev->handler, NULL);
}

void taxi__reactor_untake_locked(taxi_reactor_t *r, taxi__event_t *ev) {
  /* The events of its handler set aside meanwhile go back too, each as if
   * never taken; then the claim is released. */
  taxi__event_t aside;
  while (ev->handler &&
         taxi__serial_next_locked(r, ev->handler, ev->kind, &aside))
    untake_one_locked(r, &aside);
  if (ev->handler) taxi__closed_claim_end_locked(r, ev->handler);
  untake_one_locked(r, ev);
}

bool taxi__reactor_has_work_locked(const taxi_reactor_t *r, taxi_time_t now) {
  if (r->pending_count || r->notes.count || r->sig_any_pending) return true;
  taxi_timer_t *t = taxi__timer_heap_top(&r->timers);
  return t && t->internal_.deadline <= now;
}
