/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_dispatch.c - what happens to an operation after it was
 * started: the backend's completions are processed (a partial transfer is
 * resubmitted, a finished operation leaves its handle's queue so the next
 * one is submitted), timers expire, and the completion queue is dispatched
 * by handle_events/run or by an L/F pool (core/pools/proactor_source.c).
 *
 * The completion queue is intrusive (internal_.next), so completing an
 * operation never allocates.  Handlers run with the lock released; the
 * record is idle again before its handler is called, so the handler may
 * reuse it, free it, close its handle or stop the proactor.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/alloc.h"
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

/* ---- the completion queue ----------------------------------------------- */

static void ready_push_locked(taxi_proactor_t *p, taxi_op_t *op) {
  op->internal_.next = NULL;
  if (p->ready.tail)
    p->ready.tail->internal_.next = op;
  else
    p->ready.head = op;
  p->ready.tail = op;
  p->ready_count++;
}

static void ready_push_front_locked(taxi_proactor_t *p, taxi_op_t *op) {
  op->internal_.next = p->ready.head;
  p->ready.head = op;
  if (!p->ready.tail) p->ready.tail = op;
  p->ready_count++;
}

static taxi_op_t *ready_pop_locked(taxi_proactor_t *p) {
  taxi_op_t *op = p->ready.head;
  if (!op) return NULL;
  p->ready.head = op->internal_.next;
  if (!p->ready.head) p->ready.tail = NULL;
  op->internal_.next = NULL;
  p->ready_count--;
  return op;
}

/* Mark op finished with `status` and queue it; it belongs to no handle
 * queue any more. */
static void finish_locked(taxi_proactor_t *p, taxi_op_t *op, int status) {
  op->internal_.status = status;
  op->internal_.heap_index = TAXI__NO_ROW;
  taxi__op_state_store(op, TAXI__OP_READY);
  ready_push_locked(p, op);
}

/* ---- per-handle queues -------------------------------------------------- */

static taxi_op_t *wait_pop(taxi__opq_t *q) {
  taxi_op_t *op = q->head;
  if (!op) return NULL;
  q->head = op->internal_.next;
  if (!q->head) q->tail = NULL;
  op->internal_.next = NULL;
  return op;
}

/* The head of row/dir left: submit the next, completing in order those
 * that were cancelled meanwhile (a closed handle's) or that the backend
 * refuses.  A zombie row is freed once both its directions are empty. */
static void advance_locked(taxi_proactor_t *p, size_t row, unsigned di) {
  taxi__prow_t *r = &p->rows[row];
  taxi__pdir_t *d = &r->dir[di];
  while (!d->cur) {
    taxi_op_t *op = wait_pop(&d->wait);
    if (!op) break;
    if (r->zombie || (op->internal_.state & TAXI__OP_CANCEL)) {
      finish_locked(p, op, TAXI_ECANCELED);
      continue;
    }
    d->cur = op;
    int rc = taxi__proactor_submit_or_pause_locked(p, op);
    if (rc < 0) {
      d->cur = NULL;
      finish_locked(p, op, rc);
    }
  }
  if (r->zombie && !r->dir[0].cur && !r->dir[1].cur)
    taxi__proactor_row_release_locked(p, row);
}

void taxi__proactor_complete_locked(taxi_proactor_t *p, taxi_op_t *op,
                                    int status) {
  size_t row = op->internal_.heap_index;
  unsigned dir = op->internal_.dir;
  bool head = dir != TAXI__DIR_NONE && row != TAXI__NO_ROW &&
              p->rows[row].dir[dir - 1].cur == op;
  finish_locked(p, op, status);
  if (!head) return;
  p->rows[row].dir[dir - 1].cur = NULL;
  advance_locked(p, row, dir - 1);
}

/* ---- timers ------------------------------------------------------------- */

/* The timer heap's view of a timer operation: by deadline, then as
 * scheduled (the sequence is kept in `offset`, unused by timers).  Out of
 * the heap its index is TAXI__NOT_IN_HEAP, the same value as TAXI__NO_ROW
 * (heap_index is the row of the operations that are not timers). */
static bool op_before(const void *a, const void *b) {
  const taxi_op_t *x = a, *y = b;
  if (x->internal_.deadline != y->internal_.deadline)
    return x->internal_.deadline < y->internal_.deadline;
  return x->internal_.offset < y->internal_.offset;
}

static size_t *op_index(void *op) {
  return &((taxi_op_t *)op)->internal_.heap_index;
}

const taxi__timer_heap_ops_t taxi__proactor_timer_ops = {op_before, op_index};

void taxi__proactor_timer_push_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__op_set_phase(op, TAXI__OP_TIMER);
  taxi__timer_heap_push(&p->timers, op);
}

void taxi__proactor_timer_remove_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__timer_heap_remove(&p->timers, op); /* index: TAXI__NOT_IN_HEAP */
}

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

static void resume_accepts_locked(taxi_proactor_t *p, taxi_time_t now);

/* Move the timers due by `now` to the completion queue, earliest first,
 * and resume the accepts whose pause is over. */
static void expire_locked(taxi_proactor_t *p, taxi_time_t now) {
  taxi_op_t *op;
  while ((op = first_timer(p)) && op->internal_.deadline <= now) {
    taxi__proactor_timer_remove_locked(p, op);
    finish_locked(p, op, 0);
  }
  if (p->paused.head) resume_accepts_locked(p, now);
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

/* ---- multishot backlog -------------------------------------------------- */

static int backlog_push_locked(taxi_proactor_t *p,
                               const taxi__completion_t *c) {
  taxi__backlog_t *b = &p->backlog;
  if (b->count == b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 16;
    taxi__completion_t *n = taxi__calloc(ncap, sizeof *n);
    if (!n) return TAXI_ENOMEM;
    for (size_t i = 0; i < b->count; i++)
      n[i] = b->items[(b->head + i) % b->cap];
    taxi__free(b->items);
    b->items = n;
    b->cap = ncap;
    b->head = 0;
  }
  b->items[(b->head + b->count++) % b->cap] = *c;
  return 0;
}

/* Take the oldest backlog entry of op, keeping the others in order. */
static bool backlog_take_locked(taxi_proactor_t *p, const taxi_op_t *op,
                                taxi__completion_t *out) {
  taxi__backlog_t *b = &p->backlog;
  for (size_t i = 0; i < b->count; i++) {
    if (b->items[(b->head + i) % b->cap].op != op) continue;
    *out = b->items[(b->head + i) % b->cap];
    for (size_t j = i; j + 1 < b->count; j++)
      b->items[(b->head + j) % b->cap] = b->items[(b->head + j + 1) % b->cap];
    b->count--;
    return true;
  }
  return false;
}

/* ---- processing what the backend reports -------------------------------- */

/* A step of a transfer is done and more remains: go on, unless asked to
 * stop, in which case the bytes so far are reported with TAXI_ECANCELED. */
static void go_on_locked(taxi_proactor_t *p, taxi_op_t *op) {
  if (op->internal_.state & TAXI__OP_CANCEL) {
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
    return;
  }
  int rc = taxi__proactor_submit_or_pause_locked(p, op);
  if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
}

static void transfer_result_locked(taxi_proactor_t *p, taxi_op_t *op,
                                   int64_t result) {
  if (result < 0) {
    taxi__proactor_complete_locked(p, op, (int)result);
    return;
  }
  size_t n = (size_t)result, left = taxi__op_remaining(op);
  if (n > left) n = left; /* a backend never reports more; be safe */
  op->internal_.done += n;
  left -= n;
  int status = 0;
  switch (op->kind) {
    case TAXI_OP_READ:
      if (n == 0)
        status = TAXI_EEOF;
      else if (left && (op->internal_.flags & TAXI_READ_EXACT))
        status = 1;
      break;
    case TAXI_OP_READ_FILE:
      /* The end of the file ends the read; only an empty one is EOF. */
      if (n == 0)
        status = op->internal_.done ? 0 : TAXI_EEOF;
      else if (left)
        status = 1;
      break;
    case TAXI_OP_TRANSMIT_FILE:
      /* 0 in the file part: the file is shorter than at the call. */
      if (n == 0 && left)
        status = taxi__op_tx_part(op) == TAXI__TX_FILE ? TAXI_EEOF : TAXI_ESYS;
      else if (left)
        status = 1;
      break;
    default: /* WRITE, WRITE_FILE */
      if (n == 0 && left)
        status = TAXI_ESYS; /* no progress: never loop */
      else if (left)
        status = 1;
      break;
  }
  if (status == 1)
    go_on_locked(p, op);
  else
    taxi__proactor_complete_locked(p, op, status);
}

/* A multishot accept delivers a connection and stays in flight (and at
 * the head of its listener's queue). */
static void deliver_more_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__op_state_store(op, (op->internal_.state & ~TAXI__OP_STATE) |
                               TAXI__OP_READY | TAXI__OP_MORE);
  ready_push_locked(p, op);
}

/* ---- pauses: accepts out of descriptors, refused submissions ------------ */

void taxi__proactor_unpause_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi_op_t *prev = NULL;
  for (taxi_op_t *o = p->paused.head; o; prev = o, o = o->internal_.next) {
    if (o != op) continue;
    if (prev)
      prev->internal_.next = o->internal_.next;
    else
      p->paused.head = o->internal_.next;
    if (p->paused.tail == o) p->paused.tail = prev;
    o->internal_.next = NULL;
    break;
  }
  taxi__op_set_phase(op, TAXI__OP_SUBMITTED);
}

/* op joins the paused list until `deadline`. */
static void paused_push_locked(taxi_proactor_t *p, taxi_op_t *op,
                               taxi_time_t deadline) {
  op->internal_.deadline = deadline;
  taxi__op_set_phase(op, TAXI__OP_PAUSED);
  op->internal_.next = NULL;
  if (p->paused.tail)
    p->paused.tail->internal_.next = op;
  else
    p->paused.head = op;
  p->paused.tail = op;
}

/* Put op on the paused list for `pause`; its report waits for the lock to
 * be released (taxi__proactor_wait_locked). */
static void pause_locked(taxi_proactor_t *p, taxi_op_t *op, taxi_time_t pause,
                         const char *where, int code, unsigned attempt) {
  paused_push_locked(p, op, taxi__time_add(taxi_now(), pause));
  p->pause_report = true;
  p->pause_report_where = where;
  p->pause_report_code = code;
  p->pause_report_handle = op->handle;
  p->pause_report_attempt = attempt;
}

/* A multishot accept failed for a cause that passes (descriptors or memory
 * freed as connections end): stop accepting on its listener for a while
 * rather than end, or retry at once and spin. */
static void pause_accept_locked(taxi_proactor_t *p, taxi_op_t *op, int code) {
  taxi_time_t pause = taxi__backoff_failed(&p->accept_backoff);
  if (pause < 0) pause = TAXI__BACKOFF_MAX_NS; /* never gives up */
  p->stats.accept_pauses++;
  pause_locked(p, op, pause, "accept", code, p->accept_backoff.failures);
}

void taxi__proactor_starve_locked(taxi_proactor_t *p, taxi_op_t *op) {
  /* No deadline: a release sets one (core/proactor/proactor_buffers.c). */
  paused_push_locked(p, op, INT64_MAX);
  p->stats.buffer_waits++;
}

int taxi__proactor_submit_or_pause_locked(taxi_proactor_t *p, taxi_op_t *op) {
  int rc = taxi__proactor_submit_locked(p, op);
  if (rc == 0) {
    taxi__backoff_reset(&p->submit_backoff);
    return 0;
  }
  if (rc == TAXI__NO_BUFFER) {
    taxi__proactor_starve_locked(p, op);
    return 0;
  }
  if (rc != TAXI_EAGAIN) return rc;
  taxi_time_t pause = taxi__backoff_failed(&p->submit_backoff);
  if (pause < 0) {
    /* Refused too long: the refusal is the operation's result. */
    taxi__backoff_reset(&p->submit_backoff);
    return rc;
  }
  p->stats.submit_pauses++;
  pause_locked(p, op, pause, "submit", rc, p->submit_backoff.failures);
  return 0;
}

static void resume_accepts_locked(taxi_proactor_t *p, taxi_time_t now) {
  taxi_op_t *op = p->paused.head;
  while (op) {
    taxi_op_t *next = op->internal_.next;
    if (op->internal_.deadline <= now) {
      taxi__proactor_unpause_locked(p, op);
      int rc = taxi__proactor_submit_or_pause_locked(p, op);
      if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
    }
    op = next;
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

/* Submit op again; a refusal is its result. */
static void resubmit_locked(taxi_proactor_t *p, taxi_op_t *op) {
  int rc = taxi__proactor_submit_or_pause_locked(p, op);
  if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
}

/* The end of a multishot request the core asked for because its handler
 * fell behind (see taxi__proactor_process_locked), the handler having
 * caught up since: submitted again (true), unless cancelled meanwhile or
 * the request ended otherwise. */
static bool resume_throttled_locked(taxi_proactor_t *p, taxi_op_t *op,
                                    int64_t result) {
  unsigned st = op->internal_.state;
  if (!(st & TAXI__OP_THROTTLED)) return false;
  taxi__op_state_store(op, st & ~TAXI__OP_THROTTLED);
  if ((st & TAXI__OP_CANCEL) || result != TAXI_ECANCELED) return false;
  resubmit_locked(p, op);
  return true;
}

static void accept_result_locked(taxi_proactor_t *p, taxi_op_t *op,
                                 int64_t result, bool more) {
  if (result >= 0) {
    taxi_handle_t h = (taxi_handle_t)result;
    int rc = taxi__proactor_attach_locked(p, h);
    if (rc == 0) {
      taxi__proactor_adopt_locked(p, h);
      taxi__backoff_reset(&p->accept_backoff);
      op->internal_.file = h;
      if (op->internal_.flags & TAXI_ACCEPT_MULTISHOT)
        deliver_more_locked(p, op);
      else
        taxi__proactor_complete_locked(p, op, 0);
      return;
    }
    taxi__close(h);
    result = rc;
  }
  /* The kernel goes on with a multishot accept after a failed one. */
  if (more) return;
  if (resume_throttled_locked(p, op, result)) return;
  if ((op->internal_.flags & TAXI_ACCEPT_MULTISHOT) &&
      !(op->internal_.state & TAXI__OP_CANCEL) &&
      (result == TAXI_ETOOMANY || result == TAXI_ENOMEM)) {
    pause_accept_locked(p, op, (int)result);
    return;
  }
  taxi__proactor_complete_locked(p, op, (int)result);
}

/* Whether the backend has a buffer to choose: one neither held by the
 * application nor waiting for delivery in the backlog.  The backend ran
 * out when it said so, but its completions are processed in order, and
 * buffers given back meanwhile, before anyone waited, woke nobody. */
static bool backend_has_buffers_locked(const taxi_proactor_t *p) {
  const taxi__backlog_t *b = &p->backlog;
  unsigned pending = 0;
  for (size_t i = 0; i < b->count; i++)
    if (b->items[(b->head + i) % b->cap].flags & TAXI__CQ_BUFFER) pending++;
  return p->bufs->nheld + pending < p->bufs->count;
}

/*
 * A pooled read's completion.  Bytes: the buffer goes to the application
 * with them (op->data at the handler), delivered as one of several when
 * the read is multishot, which then goes on (the backend's request still
 * running, or submitted again after the handler).  No buffer left to the
 * backend: grow the pool or wait for a release, then read again.  End of
 * stream or a failure: the buffer the core had chosen is free again.
 */
static void pooled_result_locked(taxi_proactor_t *p, taxi_op_t *op,
                                 int64_t result, unsigned cflags) {
  unsigned st = op->internal_.state;
  bool chose = !(op->internal_.flags & TAXI__READ_SELECT);
  if (result > 0 && (chose || (cflags & TAXI__CQ_BUFFER))) {
    unsigned id =
        chose ? (unsigned)op->internal_.offset : cflags >> TAXI__CQ_BUF_SHIFT;
    taxi__pbufs_lend_locked(p, id);
    op->internal_.offset = id;
    op->internal_.done = (size_t)result;
    if (op->internal_.flags & TAXI_READ_MULTISHOT)
      deliver_more_locked(p, op);
    else
      taxi__proactor_complete_locked(p, op, 0);
    return;
  }
  if (chose && op->internal_.nbufs &&
      taxi__pbufs_unused_locked(p, (unsigned)op->internal_.offset))
    taxi__proactor_kick_locked(p);
  op->internal_.nbufs = 0;
  op->internal_.done = 0;
  if (resume_throttled_locked(p, op, result)) return;
  if ((cflags & TAXI__CQ_NOBUFS) && !(st & TAXI__OP_CANCEL)) {
    if (backend_has_buffers_locked(p) || taxi__pbufs_grow_locked(p) == 0)
      resubmit_locked(p, op);
    else
      taxi__proactor_starve_locked(p, op);
    return;
  }
  taxi__proactor_complete_locked(p, op,
                                 result == 0  ? TAXI_EEOF
                                 : result > 0 ? TAXI_ESYS
                                              : (int)result);
}

static void result_locked(taxi_proactor_t *p, taxi_op_t *op, int64_t result,
                          unsigned cflags) {
  bool more = (cflags & TAXI__CQ_MORE) != 0;
  if (op->kind == TAXI_OP_READ && (op->internal_.flags & TAXI__READ_POOLED)) {
    pooled_result_locked(p, op, result, cflags);
    return;
  }
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      accept_result_locked(p, op, result, more);
      break;
    case TAXI_OP_CONNECT:
      taxi__proactor_complete_locked(p, op, result < 0 ? (int)result : 0);
      break;
    default:
      transfer_result_locked(p, op, result);
      break;
  }
}

void taxi__proactor_process_locked(taxi_proactor_t *p,
                                   const taxi__completion_t *c) {
  taxi_op_t *op = c->op;
  if (!op) return;
  bool more = (c->flags & TAXI__CQ_MORE) != 0;
  unsigned st = op->internal_.state;
  if (!(st & TAXI__OP_INBACKEND)) return; /* nothing was owed: ignore */
  if (!more) {
    taxi__op_state_store(op, st & ~TAXI__OP_INBACKEND);
    p->in_backend--;
  }
  /* Once cancellation was asked for (or the handle closed), a failure is
   * its effect - the backend's ECANCELED, or EBADF from a handle closed
   * under a request - and is reported as such; a success stands. */
  taxi__completion_t cc = *c;
  if ((st & TAXI__OP_CANCEL) && cc.result < 0) cc.result = TAXI_ECANCELED;
  c = &cc;
  unsigned phase = st & TAXI__OP_STATE;
  if (phase == TAXI__OP_READY || phase == TAXI__OP_TAKEN) {
    /* A multishot accept's previous connection is not delivered yet. */
    if (backlog_push_locked(p, c) < 0) {
      if (c->flags & TAXI__CQ_BUFFER) {
        if (taxi__pbufs_unused_locked(p, c->flags >> TAXI__CQ_BUF_SHIFT))
          taxi__proactor_kick_locked(p);
      } else if (op->kind == TAXI_OP_ACCEPT && c->result >= 0)
        taxi__close((taxi_handle_t)c->result);
      if (!more)
        taxi__op_state_store(op, op->internal_.state | TAXI__OP_CANCEL);
      return;
    }
    /* The handler falls behind: stop the kernel accepting (or reading)
     * until it has caught up (a few more may arrive before the cancel
     * takes effect). */
    unsigned now_st = op->internal_.state;
    if (more && p->backlog.count >= TAXI__ACCEPT_BACKLOG_MAX &&
        !(now_st & (TAXI__OP_THROTTLED | TAXI__OP_CANCEL))) {
      taxi__op_state_store(op, now_st | TAXI__OP_THROTTLED);
      if (op->kind == TAXI_OP_ACCEPT)
        p->stats.accept_throttles++;
      else
        p->stats.read_throttles++;
      p->ops->cancel(p->backend, op);
    }
    return;
  }
  result_locked(p, op, c->result, c->flags);
}

/* After a multishot delivery's handler: the next delivery, or go on
 * accepting, or end. */
static void multishot_next_locked(taxi_proactor_t *p, taxi_op_t *op) {
  unsigned st = op->internal_.state & ~(TAXI__OP_MORE | TAXI__OP_STATE);
  taxi__op_state_store(op, st | TAXI__OP_SUBMITTED);
  taxi__completion_t c;
  if (backlog_take_locked(p, op, &c)) {
    result_locked(p, op, c.result, c.flags);
    return;
  }
  if (st & TAXI__OP_INBACKEND) return; /* the kernel goes on accepting */
  if (st & TAXI__OP_CANCEL) {
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
    return;
  }
  int rc = taxi__proactor_submit_or_pause_locked(p, op);
  if (rc < 0) taxi__proactor_complete_locked(p, op, rc);
}

/* ---- the dispatch steps ------------------------------------------------- */

bool taxi__proactor_take_locked(taxi_proactor_t *p, taxi_time_t now,
                                taxi__event_t *ev) {
  expire_locked(p, now);
  taxi_op_t *op = ready_pop_locked(p);
  if (!op) return false;
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
  ready_push_front_locked(p, ev->op);
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
  if (op->internal_.flags & TAXI__READ_POOLED) {
    if (status == 0 && bytes)
      op->data = taxi__pbufs_addr(p, (unsigned)op->internal_.offset);
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
  if (more) multishot_next_locked(p, op);
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
  for (int i = 0; i < n; i++) taxi__proactor_process_locked(p, &buf[i]);
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
    }
  }
}

void taxi__proactor_drain_locked(taxi_proactor_t *p) {
  taxi_op_t *op;
  while ((op = first_timer(p))) {
    taxi__proactor_timer_remove_locked(p, op);
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
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
