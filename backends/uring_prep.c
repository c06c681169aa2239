/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_prep.c - building the io_uring requests of an
 * operation's step (docs/backends/uring.md, "Each operation"): one SQE,
 * or a poll linked to it after an EAGAIN, per accept, connect, receive,
 * send or file read and write; a transmit-file's splices through a pipe
 * ("Transmit-file"); the cancel requests; and queueing a step again, on
 * the backlog when it finds no SQE.  Lock held throughout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* MSG_MORE, splice flags */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

/* ---- preparing requests (lock held) -------------------------------------- */

static void sqe_tag(struct io_uring_sqe *sqe, taxi_op_t *op, unsigned tag) {
  sqe->user_data = ud_make(op, tag);
  uop(op)->parts |= 1u << tag;
}

static int prep_accept(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  int slot = uring_handle_slot(s, op);
  struct io_uring_sqe *sqe = uring_sqe_get(s);
  const int flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
  if (!sqe) return TAXI_EAGAIN;
  u->state &= ~UOP_NATIVE;
  if (!(u->state & UOP_MULTISHOT)) {
    u->peer_len = (socklen_t)sizeof op->peer;
    io_uring_prep_accept(sqe, op->handle, (struct sockaddr *)op->peer,
                         &u->peer_len, flags);
  } else {
    /* No address: see ACCEPT in docs/backends/uring.md. */
    io_uring_prep_accept(sqe, op->handle, NULL, NULL, flags);
    if (s->native_multishot && !(u->state & UOP_MS_SINGLE)) {
      sqe->ioprio |= IORING_ACCEPT_MULTISHOT;
      u->state |= UOP_NATIVE;
    }
  }
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

static int prep_connect(uring_state_t *s, taxi_op_t *op) {
  int slot = uring_handle_slot(s, op);
  struct io_uring_sqe *sqe = uring_sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  io_uring_prep_connect(sqe, op->handle,
                        (const struct sockaddr *)op->internal_.addr,
                        (socklen_t)op->internal_.addr_len);
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

#ifdef URING_HAVE_BUF_RING
/* A pooled read: the kernel picks a buffer of the op's group (0, the
 * pool, or a datagram size's) for each arrival, and with
 * TAXI_READ_MULTISHOT goes on receiving. */
static int prep_recv_select(uring_state_t *s, taxi_op_t *op) {
  int slot = uring_handle_slot(s, op);
  struct io_uring_sqe *sqe = uring_sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  if (op->kind == TAXI_OP_RECVFROM) {
    /* A multishot datagram receive (the core asks for no other here):
     * the sender's address goes into the buffer, in room this size. */
    uring_op_t *u = uop(op);
    memset(&u->msg, 0, sizeof u->msg);
    u->msg.msg_namelen = (socklen_t)sizeof op->peer;
    io_uring_prep_recvmsg(sqe, op->handle, &u->msg, 0);
  } else {
    io_uring_prep_recv(sqe, op->handle, NULL, 0, 0);
  }
  uring_sqe_slot(sqe, op, slot);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = (__u16)taxi__op_buf_group(op);
  if (op->internal_.flags & TAXI_READ_MULTISHOT)
    sqe->ioprio |= IORING_RECV_MULTISHOT;
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}
#else
static int prep_recv_select(uring_state_t *s, taxi_op_t *op) {
  (void)s;
  (void)op;
  return TAXI_ENOTSUP; /* never asked: buf_open said the core chooses */
}
#endif

/* The SQE of op's request, after a poll for `events` linked to it when the
 * step waits for readiness first (UOP_POLL_FIRST); NULL without room for
 * them.  The poll names `slot` as the request does. */
static struct io_uring_sqe *sqe_get_polled(uring_state_t *s, taxi_op_t *op,
                                           int slot, unsigned events) {
  struct io_uring_sqe *poll;
  if (!(uop(op)->state & UOP_POLL_FIRST)) return uring_sqe_get(s);
  if (!uring_sq_reserve(s, 2)) return NULL;
  poll = io_uring_get_sqe(&s->ring);
  io_uring_prep_poll_add(poll, op->handle, events);
  uring_sqe_slot(poll, op, slot);
  poll->flags |= IOSQE_IO_LINK;
  sqe_tag(poll, op, UD_POLL);
  return io_uring_get_sqe(&s->ring);
}

static int prep_recv(uring_state_t *s, taxi_op_t *op) {
  taxi_buf_t b;
  struct io_uring_sqe *sqe;
  int slot, flags = (op->internal_.flags & TAXI_READ_EXACT) ? MSG_WAITALL : 0;
  if (op->internal_.flags & TAXI__READ_SELECT) return prep_recv_select(s, op);
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  slot = uring_handle_slot(s, op);
  sqe = sqe_get_polled(s, op, slot, POLLIN);
  if (!sqe) return TAXI_EAGAIN;
  io_uring_prep_recv(sqe, op->handle, b.base, clamp_len(b.len), flags);
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

/* WRITE, and the header or trailer of a transmit-file. */
static int prep_send(uring_state_t *s, taxi_op_t *op, int extra_flags) {
  uring_op_t *u = uop(op);
  taxi_buf_t b[TAXI_OP_MAX_BUFS];
  size_t k = taxi__op_remaining_bufs(op, b, TAXI_OP_MAX_BUFS);
  struct io_uring_sqe *sqe;
  int slot, flags = MSG_NOSIGNAL | MSG_WAITALL | extra_flags;
  if (k == 0) return TAXI_EINVAL;
  slot = uring_handle_slot(s, op);
  sqe = sqe_get_polled(s, op, slot, POLLOUT);
  if (!sqe) return TAXI_EAGAIN;
  if (k == 1) {
    io_uring_prep_send(sqe, op->handle, b[0].base, clamp_len(b[0].len), flags);
  } else {
    memset(&u->msg, 0, sizeof u->msg);
    for (size_t i = 0; i < k; i++) {
      u->iov[i].iov_base = b[i].base;
      u->iov[i].iov_len = b[i].len;
    }
    u->msg.msg_iov = u->iov;
    u->msg.msg_iovlen = k;
    io_uring_prep_sendmsg(sqe, op->handle, &u->msg, (unsigned)flags);
  }
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

/* RECVFROM, SENDTO: one datagram through a msghdr in the record's backend
 * room (the kernel reads it when the request runs, and a receive writes
 * back the name's length and MSG_TRUNC there); the sender's address goes
 * straight to op->peer. */
static int prep_dgram(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  if (op->internal_.flags & TAXI__READ_SELECT) return prep_recv_select(s, op);
  bool in = op->kind == TAXI_OP_RECVFROM;
  int slot = uring_handle_slot(s, op);
  struct io_uring_sqe *sqe = sqe_get_polled(s, op, slot, in ? POLLIN : POLLOUT);
  if (!sqe) return TAXI_EAGAIN;
  memset(&u->msg, 0, sizeof u->msg);
  u->iov[0].iov_base = op->internal_.bufs[0].base;
  u->iov[0].iov_len = clamp_len(op->internal_.bufs[0].len);
  u->msg.msg_iov = u->iov;
  u->msg.msg_iovlen = 1;
  if (in) {
    u->msg.msg_name = op->peer;
    u->msg.msg_namelen = (socklen_t)sizeof op->peer;
    io_uring_prep_recvmsg(sqe, op->handle, &u->msg, 0);
  } else {
    if (op->internal_.addr_len) {
      u->msg.msg_name = op->internal_.addr;
      u->msg.msg_namelen = (socklen_t)op->internal_.addr_len;
    }
    io_uring_prep_sendmsg(sqe, op->handle, &u->msg, MSG_NOSIGNAL);
  }
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
}

static int prep_file_rw(uring_state_t *s, taxi_op_t *op) {
  taxi_buf_t b;
  struct io_uring_sqe *sqe;
  uint64_t off = (uint64_t)taxi__op_file_offset(op);
  int slot;
  if (taxi__op_remaining_bufs(op, &b, 1) != 1) return TAXI_EINVAL;
  slot = uring_handle_slot(s, op);
  sqe = uring_sqe_get(s);
  if (!sqe) return TAXI_EAGAIN;
  if (op->kind == TAXI_OP_READ_FILE)
    io_uring_prep_read(sqe, op->handle, b.base, clamp_len(b.len), off);
  else
    io_uring_prep_write(sqe, op->handle, b.base, clamp_len(b.len), off);
  uring_sqe_slot(sqe, op, slot);
  sqe_tag(sqe, op, UD_MAIN);
  return 0;
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
  sqe_tag(fill, op, UD_FILL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1,
                       (unsigned)chunk, SPLICE_F_NONBLOCK | u->splice_more);
  uring_sqe_slot(drain, op, slot);
  sqe_tag(drain, op, UD_MAIN);
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
  sqe_tag(poll, op, UD_POLL);
  drain = io_uring_get_sqe(&s->ring);
  io_uring_prep_splice(drain, u->pipe->fd[0], -1, op->handle, -1, u->in_pipe,
                       SPLICE_F_NONBLOCK | u->splice_more);
  uring_sqe_slot(drain, op, slot);
  sqe_tag(drain, op, UD_MAIN);
  return 0;
}

static int prep_transmit(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  switch (taxi__op_tx_part(op)) {
    case TAXI__TX_HEADER: {
      bool more = op->internal_.file_len > 0 ||
                  op->internal_.bufs[TAXI__OP_TRAILER].len > 0;
      return prep_send(s, op, more ? MSG_MORE : 0);
    }
    case TAXI__TX_FILE:
      return (u->state & UOP_DRAIN) ? prep_tx_drain(s, op)
                                    : prep_tx_fill(s, op);
    case TAXI__TX_TRAILER:
      return prep_send(s, op, 0);
    default:
      return TAXI_EINVAL;
  }
}

/* Queue the request(s) of op's current step.  TAXI_EAGAIN: no SQE. */
int uring_prep_op(uring_state_t *s, taxi_op_t *op) {
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return prep_accept(s, op);
    case TAXI_OP_CONNECT:
      return prep_connect(s, op);
    case TAXI_OP_READ:
      return prep_recv(s, op);
    case TAXI_OP_WRITE:
      return prep_send(s, op, 0);
    case TAXI_OP_READ_FILE:
    case TAXI_OP_WRITE_FILE:
      return prep_file_rw(s, op);
    case TAXI_OP_TRANSMIT_FILE:
      return prep_transmit(s, op);
    case TAXI_OP_RECVFROM:
    case TAXI_OP_SENDTO:
      return prep_dgram(s, op);
    default:
      return TAXI_ENOTSUP;
  }
}

/* A step that cannot be queued at all ends the operation. */
static void fail_step(uring_state_t *s, sink_t *k, taxi_op_t *op, int code) {
  uring_op_t *u = uop(op);
  if (u->pipe) {
    uring_pipe_put(s, u->pipe, u->in_pipe == 0);
    u->pipe = NULL;
  }
  uring_emit(s, k, op, code, 0);
}

/* Queue op's step again from wait (a retry, a re-armed accept, a pipe
 * drain); without an SQE it waits on the backlog. */
void uring_requeue(uring_state_t *s, sink_t *k, taxi_op_t *op) {
  int r = uring_prep_op(s, op);
  if (r == TAXI_EAGAIN)
    uring_backlog_add(s, op, UOP_NEED_STEP);
  else if (r < 0)
    fail_step(s, k, op, r);
}

/* One IORING_OP_ASYNC_CANCEL per request of op still due. */
int uring_prep_cancels(uring_state_t *s, taxi_op_t *op) {
  uring_op_t *u = uop(op);
  unsigned n = 0;
  for (unsigned t = 0; t <= UD_TAG_MASK; t++) n += (u->parts >> t) & 1u;
  if (!uring_sq_reserve(s, n)) return TAXI_EAGAIN;
  for (unsigned t = 0; t <= UD_TAG_MASK; t++) {
    struct io_uring_sqe *sqe;
    if (!(u->parts & (1u << t))) continue;
    sqe = io_uring_get_sqe(&s->ring);
    io_uring_prep_rw(IORING_OP_ASYNC_CANCEL, sqe, -1, NULL, 0, 0);
    sqe->addr = ud_make(op, t);
    sqe->user_data = UD_CANCEL_ACK;
  }
  return 0;
}

/* Retry what waits on the backlog, oldest first, until the SQ is full. */
void uring_backlog_run(uring_state_t *s, sink_t *k) {
  while (s->backlog) {
    taxi_op_t *op = s->backlog;
    uring_op_t *u = uop(op);
    int r = (u->state & UOP_NEED_STEP) ? uring_prep_op(s, op)
                                       : uring_prep_cancels(s, op);
    if (r == TAXI_EAGAIN) return;
    s->backlog = u->bl_next;
    if (!s->backlog) s->backlog_tail = NULL;
    u->state &= ~(UOP_NEED_STEP | UOP_NEED_CANCEL);
    if (r < 0) fail_step(s, k, op, r);
  }
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_prep_absent;
#endif /* TAXI_HAVE_URING */
