/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_transmit.c - the io_uring backend's transmit-file:
 * the file range spliced file -> pipe -> socket, a pipe from a free list,
 * and a pipe the socket did not take whole drained before the step is
 * reported (docs/backends/uring.md, "Transmit-file").  Lock held
 * throughout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* splice flags, pipe2(2), F_SETPIPE_SZ */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include "core/common/alloc.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

/* ---- pipes for transmit-file --------------------------------------------- */

void uring_pipe_destroy(uring_state_t *s, uring_pipe_t *p) {
  close(p->fd[0]);
  close(p->fd[1]);
  count_syscall(s);
  count_syscall(s);
  taxi__free(p);
}

/* Grow p towards `want` bytes (at most URING_PIPE_SIZE) where it holds
 * less.  Refused (the user's pipe quota, fs.pipe-max-size), it keeps the
 * size it has: smaller steps, nothing else. */
static void pipe_grow(uring_state_t *s, uring_pipe_t *p, size_t want) {
  int cap;
  if (want > URING_PIPE_SIZE) want = URING_PIPE_SIZE;
  if (want <= p->cap) return;
  count_syscall(s);
  cap = fcntl(p->fd[1], F_SETPIPE_SZ, (int)want);
  if (cap > 0) p->cap = (unsigned)cap;
}

/* A clean pipe for a transmit-file of `len` file bytes, as big as the
 * range needs up to URING_PIPE_SIZE: a small file takes the default size
 * and no fcntl, and only pipes that carry large files count a large size
 * against the user's quota (the kernel counts a pipe's capacity, used or
 * not). */
int uring_pipe_get(uring_state_t *s, uint64_t len, uring_pipe_t **out) {
  uring_pipe_t *p = s->free_pipes;
  /* A range starting inside a page takes one page more. */
  size_t want =
      len < URING_PIPE_SIZE ? (size_t)len + s->page_size : URING_PIPE_SIZE;
  int cap;
  if (p) {
    s->free_pipes = p->next;
    s->nfree_pipes--;
  } else {
    p = taxi__malloc(sizeof *p);
    if (!p) return TAXI_ENOMEM;
    count_syscall(s);
    if (pipe2(p->fd, O_CLOEXEC) < 0) {
      int err = errno;
      taxi__free(p);
      return taxi__error_from_os(err);
    }
    count_syscall(s);
    cap = fcntl(p->fd[1], F_GETPIPE_SZ);
    p->cap = cap > 0 ? (unsigned)cap : 65536u;
  }
  pipe_grow(s, p, want);
  *out = p;
  return 0;
}

/* Give a pipe back; one that still holds data is closed, not reused. */
void uring_pipe_put(uring_state_t *s, uring_pipe_t *p, bool clean) {
  if (!clean || s->nfree_pipes >= URING_PIPES_KEPT) {
    uring_pipe_destroy(s, p);
    return;
  }
  p->next = s->free_pipes;
  s->free_pipes = p;
  s->nfree_pipes++;
}

/* Transmit-file, file part, a new step: file -> pipe, linked to
 * pipe -> socket.  The pipe is taken by submit (it may fail there). */
static int prep_tx_fill(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  size_t left = taxi__op_tx_file_remaining(op), chunk;
  struct io_uring_sqe *fill, *drain;
  int slot = uring_handle_slot(s, op); /* before the linked pair's SQEs */
  /* A file range starting inside a page takes one more pipe slot than its
   * length suggests: ask a page less than the pipe holds. */
  chunk = u->pipe->cap > 2 * s->page_size ? u->pipe->cap - s->page_size
                                          : u->pipe->cap;
  if (chunk > left) chunk = left;
  if (!uring_sq_reserve(s, 2)) return TAXI_EAGAIN;
  u->splice_more = (left > chunk || op->internal_.bufs[TAXI__OP_TRAILER].len)
                       ? SPLICE_F_MORE
                       : 0;
  u->in_pipe = 0;
  u->sent = 0;
  u->fill_res = 0;
  u->err = 0;
  fill = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(fill, op->internal_.file, taxi__op_file_offset(op),
                       u->pipe->fd[1], -1, (unsigned)chunk, SPLICE_F_NONBLOCK);
  fill->flags |= IOSQE_IO_LINK;
  uring_sqe_tag(fill, op, UD_FILL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1,
                       (unsigned)chunk, SPLICE_F_NONBLOCK | u->splice_more);
  uring_sqe_slot(drain, op, slot);
  uring_sqe_tag(drain, op, UD_MAIN);
  return 0;
}

/* Transmit-file: the pipe still holds in_pipe bytes; wait for room in the
 * socket, then splice them. */
static int prep_tx_drain(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  struct io_uring_sqe *poll, *drain;
  int slot = uring_handle_slot(s, op); /* before the linked pair's SQEs */
  if (!uring_sq_reserve(s, 2)) return TAXI_EAGAIN;
  poll = io_uring_get_sqe(&s->ring);
  io_uring_prep_poll_add(poll, op->handle, POLLOUT);
  uring_sqe_slot(poll, op, slot);
  poll->flags |= IOSQE_IO_LINK;
  uring_sqe_tag(poll, op, UD_POLL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1, u->in_pipe,
                       SPLICE_F_NONBLOCK | u->splice_more);
  uring_sqe_slot(drain, op, slot);
  uring_sqe_tag(drain, op, UD_MAIN);
  return 0;
}

int uring_prep_transmit(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  switch (taxi__op_tx_part(op)) {
    case TAXI__TX_HEADER: {
      bool more = op->internal_.file_len > 0 ||
                  op->internal_.bufs[TAXI__OP_TRAILER].len > 0;
      return uring_prep_send(s, op, more ? MSG_MORE : 0);
    }
    case TAXI__TX_FILE:
      return (u->state & UOP_DRAIN) ? prep_tx_drain(s, op)
                                    : prep_tx_fill(s, op);
    case TAXI__TX_TRAILER:
      return uring_prep_send(s, op, 0);
    default:
      return TAXI_EINVAL;
  }
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
      u->fill_res == -ECANCELED &&
      uring_retry_unrequested(s, k, op, u->fill_res))
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

void uring_on_tx_file(uring_state_t *s, sink_t *k, taxi_op_t *op, unsigned tag,
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

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_transmit_absent;
#endif /* TAXI_HAVE_URING */
