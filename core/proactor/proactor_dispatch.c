/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_dispatch.c - layer 3, the loop: it submits the
 * follow-on operations the completion layer queued (the next operation of
 * a handle, the rest of a transfer, a multishot request issued anew),
 * expires timers, ends pauses, waits on the backend and hands what it
 * reports to the completion layer, and dispatches the completion queue by
 * handle_events/run or for an L/F pool (core/pools/proactor_source.c).
 *
 * It calls the completion and submission layers (proactor_complete.c,
 * proactor_submit.c), the table (layer 1), core/common and the backend's
 * wait and wake; nothing above it (see core/proactor/proactor_impl.h).
 *
 * Handlers run with the lock released; the record is idle again before
 * its handler is called, so the handler may reuse it, free it, close its
 * handle or stop the proactor.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/detail.h"
#include "core/proactor/proactor_op.h"
#include "core/common/time_math.h"

#include <limits.h>
#include <string.h>

/* The proactor whose completion handler the calling thread is running. */
static _Thread_local const taxi_proactor_t *current;

bool taxi__proactor_in_handler(const taxi_proactor_t *p) {
  return current == p;
}

/* ---- follow-ons --------------------------------------------------------- */

/* Submit op, the head of its handle (again); a refusal is its result. */
static void submit_head_locked(taxi_proactor_t *p, taxi_op_t *op) {
  int rc = taxi__proactor_submit_or_pause_locked(p, op);
  if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
}

/* The head of a direction of `row` left: submit the next, completing in
 * order those that were cancelled meanwhile (a closed handle's) or that
 * the backend refuses.  A zombie row is freed once both its directions
 * are empty. */
static void advance_locked(taxi_proactor_t *p, uint32_t row) {
  for (unsigned di = 0; di < 2; di++) {
    for (;;) {
      taxi__prow_t *r = &p->rows[row];
      taxi__pdir_t *d = &r->dir[di];
      if (d->cur) break;
      taxi_op_t *op = taxi__opq_pop(&d->wait);
      if (!op) break;
      if (r->zombie || (op->internal_.state & TAXI__OP_CANCEL)) {
        /* Completing a queued op (not the head) queues nothing more. */
        taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
        continue;
      }
      d->cur = op;
      int rc = taxi__proactor_submit_or_pause_locked(p, op);
      if (rc < 0) {
        d->cur = NULL;
        taxi__proactor_complete_locked(p, op, rc);
      }
    }
  }
  taxi__prow_t *r = &p->rows[row];
  if (r->zombie && !r->dir[0].cur && !r->dir[1].cur)
    taxi__proactor_row_release_locked(p, row);
}

void taxi__proactor_follow_ons_locked(taxi_proactor_t *p) {
  for (;;) {
    taxi_op_t *op = taxi__opq_pop(&p->again);
    if (op) {
      submit_head_locked(p, op);
      continue;
    }
    /* Most completions leave nothing due: no call for them. */
    if (p->due_head == TAXI__ROW_NIL) break;
    advance_locked(p, taxi__proactor_due_pop_locked(p));
  }
  if (p->wake_wanted) {
    p->wake_wanted = false;
    taxi__proactor_kick_locked(p);
  }
}

/* ---- timers and pauses -------------------------------------------------- */

static taxi_op_t *first_timer(const taxi_proactor_t *p) {
  return taxi__timer_heap_top(&p->timers);
}

/* The earliest of the timers and of the ends of accept pauses (few: one
 * per listener at most). */
static taxi_time_t next_deadline(const taxi_proactor_t *p) {
  const taxi_op_t *t = first_timer(p);
  taxi_time_t d = t ? t->internal_.deadline : INT64_MAX;
  for (const taxi_op_t *op = p->paused.head; op; op = op->internal_.next)
    if (op->internal_.deadline < d) d = op->internal_.deadline;
  return d;
}

/* Resubmit the paused operations whose pause is over. */
static void resume_paused_locked(taxi_proactor_t *p, taxi_time_t now) {
  taxi_op_t *op = p->paused.head;
  while (op) {
    taxi_op_t *next = op->internal_.next;
    if (op->internal_.deadline <= now) {
      taxi__proactor_unpause_locked(p, op);
      submit_head_locked(p, op);
      taxi__proactor_follow_ons_locked(p);
    }
    op = next;
  }
}

/* Move the timers due by `now` to the completion queue, earliest first,
 * and resume the operations whose pause is over. */
static void expire_locked(taxi_proactor_t *p, taxi_time_t now) {
  taxi_op_t *op;
  while ((op = first_timer(p)) && op->internal_.deadline <= now) {
    taxi__proactor_timer_remove_locked(p, op);
    taxi__proactor_complete_locked(p, op, 0); /* no row: nothing follows */
  }
  if (p->paused.head) resume_paused_locked(p, now);
}

void taxi__proactor_kick_locked(taxi_proactor_t *p) {
  /* One wake-up per wait is enough: the waiter looks at everything when
   * it returns. */
  if (!p->waiters || p->woken) return;
  if (p->ready_count || next_deadline(p) < p->waiters_deadline) {
    p->woken = true;
    p->ops->wake(p->backend, 0);
  }
}

/* Tell the error callback of the latest pause, if any.  p->lock held;
 * released meanwhile. */
static void report_pause_locked(taxi_proactor_t *p) {
  if (!p->pause_report) return;
  p->pause_report = false;
  int code = p->pause_report_code;
  const char *where = p->pause_report_where;
  taxi_handle_t h = p->pause_report_handle;
  unsigned attempt = p->pause_report_attempt;
  if (!p->on_error) return;
  taxi__mutex_unlock(&p->lock);
  taxi__report_error(p->on_error, p->on_error_arg, code, where, h, attempt,
                     false);
  taxi__mutex_lock(&p->lock);
}

/* ---- the dispatch steps ------------------------------------------------- */

bool taxi__proactor_take_locked(taxi_proactor_t *p, taxi_time_t now,
                                taxi__event_t *ev) {
  expire_locked(p, now);
  taxi_op_t *op = taxi__opq_pop(&p->ready);
  if (!op) return false;
  p->ready_count--;
  taxi__op_set_phase(op, TAXI__OP_TAKEN);
  memset(ev, 0, sizeof *ev);
  ev->kind = TAXI__EV_COMPLETION;
  ev->op = op;
  ev->result = op->internal_.status;
  ev->cflags = (op->internal_.state & TAXI__OP_MORE) ? TAXI__CQ_MORE : 0;
  return true;
}

void taxi__proactor_untake_locked(taxi_proactor_t *p, taxi__event_t *ev) {
  taxi__op_set_phase(ev->op, TAXI__OP_READY);
  taxi__opq_push_front(&p->ready, ev->op);
  p->ready_count++;
}

/* A pooled datagram's delivery: op->data at it in its buffer, its length
 * returned.  The backend that chose the buffer says where it is and who
 * sent it; where taxi chose, it fills the buffer from its start and the
 * sender was stored at the completion.  A layout that does not hold is
 * delivered empty, flagged truncated: never read past the buffer. */
static size_t pooled_dgram_locked(taxi_proactor_t *p, taxi_op_t *op,
                                  size_t used) {
  const taxi__pbufs_t *b = taxi__pbufs_of(p, op);
  unsigned char *buf = taxi__pbufs_addr(b, (unsigned)op->internal_.offset);
  op->data = buf;
  if (!(op->internal_.flags & TAXI__READ_SELECT)) return used;
  size_t off = 0, len = 0;
  if (p->ops->dgram_unpack(p->backend, op, buf, used, &off, &len) < 0 ||
      off > b->size || len > b->size - off) {
    op->msg_flags = TAXI_MSG_TRUNCATED;
    return 0;
  }
  op->data = buf + off;
  return len;
}

bool taxi__proactor_next_dgram_locked(taxi_proactor_t *p, taxi_op_t *op,
                                      size_t *bytes) {
  unsigned st = op->internal_.state;
  if ((st & TAXI__OP_STATE) != TAXI__OP_TAKEN || !(st & TAXI__OP_MORE) ||
      op->kind != TAXI_OP_RECVFROM ||
      !(op->internal_.flags & TAXI__READ_POOLED) ||
      !taxi__proactor_backlog_dgram_locked(p, op))
    return false;
  op->data = NULL;
  *bytes = pooled_dgram_locked(p, op, op->internal_.done);
  p->stats.completed++;
  return true;
}

bool taxi__proactor_run_locked(taxi_proactor_t *p, taxi__event_t *ev) {
  taxi_op_t *op = ev->op;
  bool more = (op->internal_.state & TAXI__OP_MORE) != 0;
  taxi_completion_fn fn = op->internal_.fn;
  void *act = op->internal_.act;
  int status = more ? 0 : op->internal_.status;
  size_t bytes = op->internal_.done;
  if (op->kind == TAXI_OP_ACCEPT)
    op->accepted = status == 0 ? op->internal_.file : TAXI_INVALID_HANDLE;
  op->data = NULL;
  if ((op->internal_.flags & TAXI__READ_POOLED) &&
      op->kind == TAXI_OP_RECVFROM) {
    if (status == 0) bytes = pooled_dgram_locked(p, op, bytes);
  } else if (op->internal_.flags & TAXI__READ_POOLED) {
    if (status == 0 && bytes)
      op->data = taxi__pbufs_addr(taxi__pbufs_of(p, op),
                                  (unsigned)op->internal_.offset);
    else
      bytes = 0; /* an ending: no buffer, no bytes */
  }
  op->more = more;
  p->stats.completed++;
  if (status == TAXI_ECANCELED) p->stats.cancelled++;
  /* From here on the record is the application's again (unless a
   * multishot accept goes on): the handler may reuse or free it. */
  if (!more) taxi__op_state_store(op, TAXI__OP_IDLE);
  const taxi_proactor_t *outer = current;
  current = p;
  taxi__mutex_unlock(&p->lock);
  fn(op, status, bytes, act);
  taxi__mutex_lock(&p->lock);
  current = outer;
  if (more) {
    taxi__proactor_multishot_next_locked(p, op);
    taxi__proactor_follow_ons_locked(p);
  }
  return true;
}

int taxi__proactor_wait_locked(taxi_proactor_t *p, taxi__completion_t *buf,
                               size_t cap, taxi_time_t deadline,
                               taxi_time_t *now) {
  if (next_deadline(p) < deadline) deadline = next_deadline(p);
  if (p->ready_count || p->sticky) deadline = *now;
  if (p->waiters++ == 0 || deadline > p->waiters_deadline)
    p->waiters_deadline = deadline;
  taxi__mutex_unlock(&p->lock);

  int n = p->ops->wait(p->backend, buf, cap, taxi__deadline_ms(*now, deadline));

  taxi__mutex_lock(&p->lock);
  p->waiters--;
  p->woken = false;
  *now = taxi_now();
  if (n < 0) return n;
  /* Each completion's follow-ons are submitted before the next is looked
   * at, as they come. */
  for (int i = 0; i < n; i++) {
    taxi__proactor_process_locked(p, &buf[i]);
    taxi__proactor_follow_ons_locked(p);
  }
  report_pause_locked(p);
  return n;
}

bool taxi__proactor_has_work_locked(const taxi_proactor_t *p, taxi_time_t now) {
  return p->ready_count > 0 || next_deadline(p) <= now;
}

/* ---- handle_events, run, stop ------------------------------------------- */

/* Run the handlers of what is in the completion queue now (not of what
 * they queue themselves: a handler that posts again must not keep this
 * call from returning).  Returns how many ran. */
static int run_batch_locked(taxi_proactor_t *p, taxi_time_t now) {
  expire_locked(p, now);
  size_t budget = p->ready_count;
  int ran = 0;
  taxi__event_t ev;
  while (budget-- > 0 && !atomic_load(&p->stopped) &&
         taxi__proactor_take_locked(p, now, &ev)) {
    taxi__proactor_run_locked(p, &ev);
    ran++;
  }
  return ran;
}

/* The backend's wait failed with `code`: reported, and paused for if it
 * may pass (core/common/backoff.h).  Returns 0 to go on, or the code. */
static int wait_failed_locked(taxi_proactor_t *p, int code,
                              taxi_time_t deadline, taxi_time_t *now) {
  taxi__mutex_unlock(&p->lock);
  int rc =
      taxi__backoff_wait_failed(&p->wait_backoff, p->on_error, p->on_error_arg,
                                code, deadline, &p->stopped);
  taxi__mutex_lock(&p->lock);
  *now = taxi_now();
  if (rc == 0) p->stats.transient_errors++;
  return rc;
}

static int dispatch(taxi_proactor_t *p, int timeout_ms, bool forever) {
  if (!p) return TAXI_EINVAL;
  taxi__mutex_lock(&p->lock);
  taxi__thread_id_t self = taxi__thread_self();
  if (p->has_owner || p->pool ||
      (p->bound && !taxi__thread_equal(p->bound_thread, self))) {
    const char *why = p->pool ? "a Leader/Followers pool dispatches it"
                      : p->has_owner
                          ? "another thread is dispatching it (or this is one "
                            "of its completion handlers)"
                          : "made with TAXI_PROACTOR_ONE_THREAD, and another "
                            "thread dispatched it first";
    taxi__mutex_unlock(&p->lock);
    return taxi__refuse(
        TAXI_EBUSY, "%s: p: %s",
        forever ? "taxi_proactor_run" : "taxi_proactor_handle_events", why);
  }
  if ((p->flags & TAXI_PROACTOR_ONE_THREAD) && !p->bound) {
    p->bound = true;
    p->bound_thread = self;
  }
  p->has_owner = true;
  p->owner = self;
  taxi_time_t now = taxi_now();
  taxi_time_t deadline =
      forever ? INT64_MAX : taxi__deadline_after_ms(now, timeout_ms);
  int rc = 0, ran = 0;
  bool waited = false;
  while (!atomic_load(&p->stopped)) {
    expire_locked(p, now);
    if (p->ready_count == 0 || forever) {
      /* Run also polls the backend between batches, so a handler that
       * keeps posting cannot starve the I/O. */
      if (!forever && waited && now >= deadline) break;
      rc = taxi__proactor_wait_locked(p, p->wait_buf, p->max_events, deadline,
                                      &now);
      waited = true;
      if (rc < 0) {
        if ((rc = wait_failed_locked(p, rc, deadline, &now)) < 0) break;
        continue;
      }
      taxi__backoff_reset(&p->wait_backoff);
      expire_locked(p, now);
      if (p->ready_count == 0) continue;
    }
    int n = run_batch_locked(p, now);
    ran = ran > INT_MAX - n ? INT_MAX : ran + n;
    now = taxi_now();
    if (!forever) break;
  }
  p->has_owner = false;
  /* Stopped, before the call or during it: one answer, whatever ran. */
  if (rc >= 0 && atomic_load(&p->stopped)) rc = TAXI_ESTOPPED;
  taxi__mutex_unlock(&p->lock);
  if (rc < 0) return rc;
  return forever ? 0 : ran;
}

int taxi_proactor_handle_events(taxi_proactor_t *p, int timeout_ms) {
  return dispatch(p, timeout_ms, false);
}

int taxi_proactor_run(taxi_proactor_t *p) { return dispatch(p, -1, true); }

int taxi_proactor_stop(taxi_proactor_t *p) {
  if (!p) return TAXI_EINVAL;
  atomic_store(&p->stopped, true);
  p->ops->wake(p->backend, 1);
  return 0;
}

int taxi_proactor_restart(taxi_proactor_t *p) {
  if (!p) return TAXI_EINVAL;
  atomic_store(&p->stopped, false);
  return 0;
}

/* ---- destroy ------------------------------------------------------------ */

/* Complete, with TAXI_ECANCELED, whatever a backend can no longer report
 * (its wait failed for good). */
static void abandon_locked(taxi_proactor_t *p) {
  for (uint32_t i = 0; i < p->nrows; i++) {
    taxi__prow_t *r = &p->rows[i];
    if (!r->used) continue;
    for (unsigned d = 0; d < 2; d++) {
      taxi_op_t *op = r->dir[d].cur;
      if (!op || !(op->internal_.state & TAXI__OP_INBACKEND)) continue;
      taxi__op_state_store(op, op->internal_.state & ~TAXI__OP_INBACKEND);
      p->in_backend--;
      taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
      taxi__proactor_follow_ons_locked(p);
    }
  }
}

void taxi__proactor_drain_locked(taxi_proactor_t *p) {
  taxi_op_t *op;
  while ((op = first_timer(p))) {
    taxi__proactor_timer_remove_locked(p, op);
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED); /* no row */
  }
  /*
   * Wait for the backend to report every operation it holds, however long
   * that takes: until then the OS may still write into the records and
   * buffers, and the descriptors stay open (core/proactor/proactor_impl.h), so
   * giving up early would hand memory back that the kernel still uses.
   * The wait ends because the caller cancelled every operation in the
   * backend first (closing every handle), no new one can start (starts
   * are refused while destroying), and every backend completes a
   * cancelled operation promptly: io_uring with IORING_OP_ASYNC_CANCEL,
   * POSIX aio by readiness-gated short requests (a file request finishes
   * by itself), the emulated backend and IOCP at once.  A failing wait is
   * retried after a growing pause and reported; only one that keeps
   * failing (core/common/backoff.h's limit, reported fatal) ends the wait: that
   * backend can no longer tell anything, and its close() releases what
   * the OS still holds.
   */
  taxi_time_t now = taxi_now();
  taxi__backoff_t backoff = {0};
  taxi__event_t ev;
  for (;;) {
    while (taxi__proactor_take_locked(p, now, &ev))
      taxi__proactor_run_locked(p, &ev);
    if (p->in_backend == 0 && p->ready_count == 0) break;
    if (p->in_backend == 0) continue;
    now = taxi_now();
    int n = taxi__proactor_wait_locked(p, p->wait_buf, p->max_events,
                                       now + 100 * TAXI_NSEC_PER_MSEC, &now);
    if (n >= 0) {
      taxi__backoff_reset(&backoff);
      continue;
    }
    if (n == TAXI_ESTOPPED) {
      /* The backend can report nothing more, and the OS holds nothing of
       * these operations any longer (a one-thread io_uring whose thread
       * has gone: backends/uring.c). */
      abandon_locked(p);
      continue;
    }
    taxi_time_t pause =
        taxi__error_transient(n) ? taxi__backoff_failed(&backoff) : -1;
    taxi__mutex_unlock(&p->lock);
    taxi__report_error(p->on_error, p->on_error_arg, n, "destroy",
                       TAXI_INVALID_HANDLE, backoff.failures + (pause < 0),
                       pause < 0);
    if (pause >= 0) taxi__sleep(pause);
    taxi__mutex_lock(&p->lock);
    now = taxi_now();
    if (pause < 0) abandon_locked(p);
  }
}
