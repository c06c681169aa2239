/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_complete.c - layer 2, completion: what happens to
 * an operation when the backend reports on it.  A finished operation leaves
 * its handle's queue and joins the completion queue; a partial transfer,
 * a multishot request the core issues anew, or the next operation of the
 * handle is a follow-on, left for the loop (proactor_dispatch.c) to
 * submit: this layer never submits, so submit -> complete -> submit never
 * recurses.
 *
 * It calls the table, the buffer pool and proactor_op.c (layer 1),
 * core/common and the backend's cancel; nothing above.  Work for a higher
 * layer goes through the state: the `due` and `again` lists, the
 * wake_wanted flag (see core/proactor/proactor_impl.h).
 *
 * The completion queue is intrusive (internal_.next), so completing an
 * operation never allocates.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/alloc.h"
#include "core/proactor/proactor_op.h"

/* ---- finishing ---------------------------------------------------------- */

/* Mark op finished with `status` and queue it; it belongs to no handle
 * queue any more. */
static void finish_locked(taxi_proactor_t *p, taxi_op_t *op, int status) {
  op->internal_.status = status;
  op->internal_.heap_index = TAXI__NO_ROW;
  taxi__op_state_store(op, TAXI__OP_READY);
  taxi__opq_push(&p->ready, op);
  p->ready_count++;
}

void taxi__proactor_complete_locked(taxi_proactor_t *p, taxi_op_t *op,
                                    int status) {
  size_t row = op->internal_.heap_index;
  unsigned dir = op->internal_.dir;
  bool head = dir != TAXI__DIR_NONE && row != TAXI__NO_ROW &&
              p->rows[row].dir[dir - 1].cur == op;
  finish_locked(p, op, status);
  if (!head) return;
  taxi__prow_t *r = &p->rows[row];
  r->dir[dir - 1].cur = NULL;
  /* The next of the handle is the loop's to submit (and a zombie row its
   * to free); a handle with nothing waiting has nothing to follow. */
  if (r->dir[dir - 1].wait.head || r->zombie)
    taxi__proactor_due_push_locked(p, row);
}

/* A follow-on: op (still the head of its handle, with no backend) is to be
 * submitted again by the loop. */
static void again_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__opq_push(&p->again, op);
}

/* ---- multishot backlog -------------------------------------------------- */

static int backlog_push_locked(taxi_proactor_t *p,
                               const taxi__completion_t *c) {
  taxi__backlog_t *b = &p->backlog;
  if (b->count == b->cap) {
    size_t ncap = b->cap * 2; /* the first ring came with the proactor */
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

/* Where the oldest backlog entry of op is (its index from head), or
 * b->count when it has none. */
static size_t backlog_find_locked(const taxi_proactor_t *p,
                                  const taxi_op_t *op) {
  const taxi__backlog_t *b = &p->backlog;
  size_t i = 0;
  while (i < b->count && b->items[(b->head + i) % b->cap].op != op) i++;
  return i;
}

/* Remove entry i (an index from head), keeping the others in order. */
static void backlog_remove_locked(taxi_proactor_t *p, size_t i) {
  taxi__backlog_t *b = &p->backlog;
  if (i == 0) {
    /* The oldest, as with one multishot request behind: no shift (a
     * backlog of 64 datagrams moved 2,000 entries to be taken). */
    b->head = (b->head + 1) % b->cap;
    b->count--;
    return;
  }
  for (size_t j = i; j + 1 < b->count; j++)
    b->items[(b->head + j) % b->cap] = b->items[(b->head + j + 1) % b->cap];
  b->count--;
}

/* Take the oldest backlog entry of op, keeping the others in order. */
static bool backlog_take_locked(taxi_proactor_t *p, const taxi_op_t *op,
                                taxi__completion_t *out) {
  taxi__backlog_t *b = &p->backlog;
  size_t i = backlog_find_locked(p, op);
  if (i == b->count) return false;
  *out = b->items[(b->head + i) % b->cap];
  backlog_remove_locked(p, i);
  return true;
}

/* ---- processing what the backend reports -------------------------------- */

/* A step of a transfer is done and more remains: go on, unless asked to
 * stop, in which case the bytes so far are reported with TAXI_ECANCELED. */
static void go_on_locked(taxi_proactor_t *p, taxi_op_t *op) {
  if (op->internal_.state & TAXI__OP_CANCEL) {
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
    return;
  }
  again_locked(p, op);
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
  taxi__opq_push(&p->ready, op);
  p->ready_count++;
}

/* A multishot accept failed for a cause that passes (descriptors or memory
 * freed as connections end): stop accepting on its listener for a while
 * rather than end, or retry at once and spin. */
static void pause_accept_locked(taxi_proactor_t *p, taxi_op_t *op, int code) {
  taxi_time_t pause = taxi__backoff_failed(&p->accept_backoff);
  if (pause < 0) pause = TAXI__BACKOFF_MAX_NS; /* never gives up */
  p->stats.accept_pauses++;
  taxi__proactor_pause_locked(p, op, pause, "accept", code,
                              p->accept_backoff.failures);
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
  again_locked(p, op);
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

/* Whether the backend has a buffer of b to choose: one neither held by
 * the application nor waiting for delivery in the backlog.  The backend
 * ran out when it said so, but its completions are processed in order,
 * and buffers given back meanwhile, before anyone waited, woke nobody. */
static bool backend_has_buffers_locked(const taxi_proactor_t *p,
                                       const taxi__pbufs_t *b) {
  const taxi__backlog_t *q = &p->backlog;
  unsigned pending = 0;
  for (size_t i = 0; i < q->count; i++) {
    const taxi__completion_t *c = &q->items[(q->head + i) % q->cap];
    if ((c->flags & TAXI__CQ_BUFFER) && taxi__pbufs_of(p, c->op) == b)
      pending++;
  }
  return b->nheld + pending < b->count;
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
  taxi__pbufs_t *b = taxi__pbufs_of(p, op);
  bool chose = !(op->internal_.flags & TAXI__READ_SELECT);
  /* A datagram may be empty (and is no end of stream). */
  bool dgram = op->kind == TAXI_OP_RECVFROM;
  if ((result > 0 || (dgram && result == 0)) &&
      (chose || (cflags & TAXI__CQ_BUFFER))) {
    unsigned id =
        chose ? (unsigned)op->internal_.offset : cflags >> TAXI__CQ_BUF_SHIFT;
    taxi__pbufs_lend_locked(b, id, dgram);
    op->internal_.offset = id;
    op->internal_.done = (size_t)result;
    if (op->internal_.flags & TAXI_READ_MULTISHOT)
      deliver_more_locked(p, op);
    else
      taxi__proactor_complete_locked(p, op, 0);
    return;
  }
  if (chose && op->internal_.nbufs &&
      taxi__pbufs_unused_locked(p, b, (unsigned)op->internal_.offset))
    p->wake_wanted = true;
  op->internal_.nbufs = 0;
  op->internal_.done = 0;
  if (resume_throttled_locked(p, op, result)) return;
  if ((cflags & TAXI__CQ_NOBUFS) && !(st & TAXI__OP_CANCEL)) {
    /* The ring ran dry under this request.  The group (the pool, or the
     * datagram size's) grew since it was submitted: read again.  Else it
     * is too small for the reads in flight: grow it before anything
     * else, since the buffers the accounting below calls free may be the
     * ones the kernel filled for completions not reaped yet, and reading
     * again on that guess fails at once, request after request (10,000
     * multishot reads on a pool of 128 spun so).  At the cap, the guess
     * is all there is. */
    if (op->internal_.total < b->count || taxi__pbufs_grow_locked(p, b) == 0 ||
        backend_has_buffers_locked(p, b))
      again_locked(p, op);
    else
      taxi__proactor_starve_locked(p, op);
    return;
  }
  taxi__proactor_complete_locked(p, op,
                                 result == 0 && !dgram ? TAXI_EEOF
                                 : result >= 0         ? TAXI_ESYS
                                                       : (int)result);
}

static void result_locked(taxi_proactor_t *p, taxi_op_t *op, int64_t result,
                          unsigned cflags) {
  bool more = (cflags & TAXI__CQ_MORE) != 0;
  if ((op->kind == TAXI_OP_READ || op->kind == TAXI_OP_RECVFROM) &&
      (op->internal_.flags & TAXI__READ_POOLED)) {
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
    case TAXI_OP_RECVFROM:
    case TAXI_OP_SENDTO:
      /* One datagram, whole (or truncated, as msg_flags says), in one
       * step: no end of stream, nothing to resume. */
      if (result >= 0)
        op->internal_.done = (size_t)result <= op->internal_.total
                                 ? (size_t)result
                                 : op->internal_.total;
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
        if (taxi__pbufs_unused_locked(p, taxi__pbufs_of(p, op),
                                      c->flags >> TAXI__CQ_BUF_SHIFT))
          p->wake_wanted = true;
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

bool taxi__proactor_backlog_dgram_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__backlog_t *b = &p->backlog;
  if (op->internal_.state & TAXI__OP_CANCEL) return false;
  size_t i = backlog_find_locked(p, op);
  if (i == b->count) return false;
  const taxi__completion_t *c = &b->items[(b->head + i) % b->cap];
  /* Only a datagram in a buffer the backend chose, as pooled_result_locked
   * would deliver it: an end, a failure or a dry ring is left for the way
   * after the handler (a request to issue again, a pause, the end's
   * delivery). */
  if (c->result < 0 || !(c->flags & TAXI__CQ_BUFFER)) return false;
  unsigned id = c->flags >> TAXI__CQ_BUF_SHIFT;
  size_t used = (size_t)c->result;
  backlog_remove_locked(p, i);
  taxi__pbufs_lend_locked(taxi__pbufs_of(p, op), id, true);
  op->internal_.offset = id;
  op->internal_.done = used;
  return true;
}

void taxi__proactor_multishot_next_locked(taxi_proactor_t *p, taxi_op_t *op) {
  unsigned st = op->internal_.state & ~(TAXI__OP_MORE | TAXI__OP_STATE);
  taxi__op_state_store(op, st | TAXI__OP_SUBMITTED);
  taxi__completion_t c;
  if (backlog_take_locked(p, op, &c)) {
    /* Cancelled since it was kept: a failure is the cancel's effect, as
     * in taxi__proactor_process_locked (a pooled read's ENOBUFS would
     * otherwise end it with TAXI_ENOMEM instead of TAXI_ECANCELED). */
    if ((st & TAXI__OP_CANCEL) && c.result < 0) c.result = TAXI_ECANCELED;
    result_locked(p, op, c.result, c.flags);
    return;
  }
  if (st & TAXI__OP_INBACKEND) return; /* the kernel goes on accepting */
  if (st & TAXI__OP_CANCEL) {
    taxi__proactor_complete_locked(p, op, TAXI_ECANCELED);
    return;
  }
  again_locked(p, op); /* the core issues the next accept */
}
