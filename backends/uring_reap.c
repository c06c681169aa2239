/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_reap.c - reaping the io_uring backend's completions:
 * each CQE turned into the operation's result, a next step, a retry of a
 * cancellation nobody asked for, or nothing (the backend's own requests);
 * a transmit-file step's pipe drained before it is reported
 * (docs/backends/uring.md, "Transmit-file").  Lock held throughout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* cpu_set_t in liburing.h */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

/* ---- completions (lock held) --------------------------------------------- */

/* An -ECANCELED nobody asked for (the submitting thread exited): submit
 * the step again rather than report it.  True if it was. */
static bool retry_unrequested(uring_state_t *s, sink_t *k, taxi_op_t *op,
                              int res) {
  uring_op_t *u = uop(op);
  if (res != -ECANCELED || (u->state & UOP_CANCEL)) return false;
  if (u->retries >= URING_MAX_RETRIES) return false;
  u->retries++;
  uring_requeue(s, k, op);
  return true;
}

/* A step submitted behind its poll (UOP_POLL_FIRST): true once the CQEs of
 * both are in, with *res the step's outcome - the request's result, or the
 * poll's error where the poll failed and the kernel cancelled the request
 * linked to it. */
static bool poll_first_done(uring_op_t *u, unsigned tag, int *res) {
  if (tag == UD_POLL) {
    if (*res < 0 && *res != -ECANCELED && !u->err) u->err = *res;
  } else {
    u->main_res = *res;
  }
  if (u->parts) return false;
  u->state &= ~UOP_POLL_FIRST;
  *res = u->main_res == -ECANCELED && u->err ? u->err : u->main_res;
  return true;
}

static void on_simple(uring_state_t *s, sink_t *k, taxi_op_t *op, int res) {
  uring_op_t *u = uop(op);
  if (res == -EAGAIN && !(u->state & UOP_CANCEL) &&
      (op->kind == TAXI_OP_READ || op->kind == TAXI_OP_WRITE ||
       op->kind == TAXI_OP_TRANSMIT_FILE || op->kind == TAXI_OP_RECVFROM ||
       op->kind == TAXI_OP_SENDTO)) {
    /* A send or receive on the socket (a transmit-file's header or
     * trailer) that io-wq ended for want of room or data (see WRITE in
     * docs/backends/uring.md): not a result.  Again, once the socket is
     * ready; the bytes it moved before were reported already. */
    u->state |= UOP_POLL_FIRST;
    u->err = 0;
    u->main_res = 0;
    uring_requeue(s, k, op);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  uop(op)->retries = 0;
  if (op->kind == TAXI_OP_ACCEPT && res >= 0) op->peer_len = uop(op)->peer_len;
  if (op->kind == TAXI_OP_RECVFROM && res >= 0) {
    /* What the kernel wrote back into the msghdr (____sys_recvmsg). */
    op->peer_len = (unsigned)uop(op)->msg.msg_namelen;
    op->msg_flags =
        (uop(op)->msg.msg_flags & MSG_TRUNC) ? TAXI_MSG_TRUNCATED : 0u;
  }
  uring_emit(s, k, op, os_result(res), 0);
}

static void on_multishot(uring_state_t *s, sink_t *k, taxi_op_t *op, int res,
                         unsigned cflags) {
  uring_op_t *u = uop(op);
  if (cflags & IORING_CQE_F_MORE) {
    u->state |= UOP_MS_WORKED;
    u->retries = 0;
    uring_emit(s, k, op, os_result(res), TAXI__CQ_MORE);
    return;
  }
  /* The request ended. */
  if (res >= 0) {
    u->retries = 0;
    if (u->state & UOP_MS_PROBE) {
      /* The single accept worked where the multishot one got EINVAL: the
       * kernel lacks the flag.  Every later one is single-shot at once. */
      u->state &= ~UOP_MS_PROBE;
      s->native_multishot = false;
    }
    if (u->state & UOP_CANCEL) {
      uring_emit(s, k, op, res, TAXI__CQ_MORE);
      uring_emit(s, k, op, TAXI_ECANCELED, 0);
    } else {
      uring_emit(s, k, op, res, TAXI__CQ_MORE);
      uring_requeue(s, k, op);
    }
    return;
  }
  if (res == -EINVAL && (u->state & UOP_NATIVE) &&
      !(u->state & (UOP_MS_WORKED | UOP_CANCEL))) {
    /* A kernel without multishot accept (before 5.19) says EINVAL, and so
     * does a socket that is not listening.  A single accept tells which:
     * its own EINVAL is reported; its success turns the ring to single
     * accepts, so one application error does not. */
    u->state |= UOP_MS_SINGLE | UOP_MS_PROBE;
    uring_requeue(s, k, op);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  uring_emit(s, k, op, os_result(res), 0);
}

/* A pooled read's CQE: the buffer the kernel chose travels in the flags
 * (backends/completion.h); -ENOBUFS, the group empty, ends the request
 * and the core waits for a buffer or grows the pool. */
static void on_pooled(uring_state_t *s, sink_t *k, taxi_op_t *op, int res,
                      unsigned cflags) {
  unsigned f = 0;
#ifdef URING_HAVE_BUF_RING
  if (res > 0 && (cflags & IORING_CQE_F_BUFFER))
    f = TAXI__CQ_BUFFER |
        ((cflags >> IORING_CQE_BUFFER_SHIFT) << TAXI__CQ_BUF_SHIFT);
#endif
  if (cflags & IORING_CQE_F_MORE) {
    uop(op)->retries = 0;
    uring_emit(s, k, op, res, f | TAXI__CQ_MORE);
    return;
  }
  if (res == -ENOBUFS) {
    uring_emit(s, k, op, TAXI_ENOMEM, TAXI__CQ_NOBUFS);
    return;
  }
  if (retry_unrequested(s, k, op, res)) return;
  uop(op)->retries = 0;
  uring_emit(s, k, op, os_result(res), f);
}

/* Transmit-file, file part: every request of the step has completed. */
void uring_tx_step_done(uring_state_t *s, sink_t *k, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  int64_t result;
  if (!(u->state & UOP_CANCEL) && !u->err && u->in_pipe > 0) {
    /* The socket took less than the pipe holds: drain before reporting. */
    u->state |= UOP_DRAIN;
    uring_requeue(s, k, op);
    return;
  }
  u->state &= ~UOP_DRAIN;
  if (u->sent == 0 && !(u->state & UOP_CANCEL) && !u->err &&
      u->fill_res == -ECANCELED && retry_unrequested(s, k, op, u->fill_res))
    return; /* keeps the pipe, which is empty */
  uring_pipe_put(s, u->pipe, u->in_pipe == 0);
  u->pipe = NULL;
  u->retries = 0;
  if (u->sent > 0)
    result = (int64_t)u->sent;
  else if (u->state & UOP_CANCEL)
    result = TAXI_ECANCELED;
  else if (u->err)
    result = os_result(u->err);
  else if (u->fill_res < 0)
    result = os_result(u->fill_res);
  else
    /* 0: the file ended before the range did (it shrank since the call);
     * the core reports TAXI_EEOF. */
    result = 0;
  uring_emit(s, k, op, result, 0);
}

static void note_err(uring_op_t *u, int res) {
  /* EAGAIN (a full socket) and ECANCELED (a broken link, a cancel) are
   * what a drain handles, not errors. */
  if (res < 0 && res != -EAGAIN && res != -ECANCELED && !u->err) u->err = res;
}

static void on_tx_file(uring_state_t *s, sink_t *k, taxi_op_t *op, unsigned tag,
                       int res) {
  uring_op_t *u = uop(op);
  switch (tag) {
    case UD_FILL:
      u->fill_res = res;
      if (res > 0) u->in_pipe += (uint32_t)res;
      note_err(u, res);
      break;
    case UD_MAIN:
      if (res > 0) {
        u->in_pipe -= (uint32_t)res;
        u->sent += (uint64_t)res;
      } else if (res == 0 && u->in_pipe > 0 && !(u->parts & (1u << UD_FILL))) {
        /* Nothing moved although the pipe holds data: not a state that
         * draining again would leave. */
        note_err(u, -EIO);
      }
      note_err(u, res);
      break;
    default: /* UD_POLL: a mask, or an error the splice will meet too */
      note_err(u, res);
      break;
  }
  if (u->parts == 0) uring_tx_step_done(s, k, op);
}

void uring_on_cqe(uring_state_t *s, sink_t *k, const struct io_uring_cqe *c,
                  bool *woken) {
  taxi_op_t *op;
  unsigned tag = (unsigned)(c->user_data & UD_TAG_MASK);
  uring_op_t *u;
  int res = c->res;
  if (c->user_data & URING_FILES_UD) {
    uring_files_cqe(&s->files, c->user_data, c->res);
    return;
  }
  op = (taxi_op_t *)(uintptr_t)(c->user_data & ~(uint64_t)UD_TAG_MASK);
  if (!op) {
    if (c->user_data == UD_WAKE) uring_on_wake_cqe(s, c);
    (void)woken; /* told by wake_asked (uring_wait) */
    return;      /* UD_CANCEL_ACK: the cancelled request reports itself */
  }
  u = uop(op);
  /* A multishot request stays in flight while its CQEs say MORE. */
  if (!(c->flags & IORING_CQE_F_MORE)) u->parts &= ~(1u << tag);
  if ((u->state & UOP_POLL_FIRST) && !poll_first_done(u, tag, &res)) return;
  if (res == -EBADF && u->fixed && u->parts == 0 && !u->pipe &&
      !(u->state & UOP_CANCEL) &&
      uring_files_install_failed(&s->files, op->handle, u->fixed - 1)) {
    /* The install before it failed: again, on the fd this time. */
    uring_requeue(s, k, op);
    return;
  }
  if (op->kind == TAXI_OP_TRANSMIT_FILE && u->pipe)
    on_tx_file(s, k, op, tag, res);
  else if (op->internal_.flags & TAXI__READ_SELECT)
    on_pooled(s, k, op, res, c->flags);
  else if (u->state & UOP_MULTISHOT)
    on_multishot(s, k, op, res, c->flags);
  else
    on_simple(s, k, op, res);
}

/* Reap CQEs while there is room; the rest stay in the ring. */
void uring_reap(uring_state_t *s, sink_t *k, bool *woken) {
  struct io_uring_cqe *c;
  unsigned head, seen = 0;
  io_uring_for_each_cqe(&s->ring, head, c) {
    if (k->n >= k->max) break;
    uring_on_cqe(s, k, c, woken);
    seen++;
  }
  io_uring_cq_advance(&s->ring, seen);
  if (seen)
    atomic_fetch_add_explicit(&s->counters->cqes, seen, memory_order_relaxed);
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_reap_absent;
#endif /* TAXI_HAVE_URING */
