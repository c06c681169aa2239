/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/nbio_step.c - the choice of an operation's next step by its
 * kind, and the readiness a step waits for.  The same on every system;
 * the steps themselves are backends/nbio.c (POSIX) and nbio_win32.c.
 */
#include "config.h"

#include "backends/nbio.h"

int64_t taxi__nbio_step(taxi_op_t *op, bool connect_started,
                        taxi__completion_counters_t *c) {
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return taxi__nbio_accept(op, c);
    case TAXI_OP_CONNECT:
      return connect_started ? taxi__nbio_connect_check(op, c)
                             : taxi__nbio_connect_start(op, c);
    case TAXI_OP_READ:
      return taxi__nbio_read(op, c);
    case TAXI_OP_WRITE:
      return taxi__nbio_write(op, c);
    case TAXI_OP_READ_FILE:
      return taxi__nbio_pread(op, c);
    case TAXI_OP_WRITE_FILE:
      return taxi__nbio_pwrite(op, c);
    case TAXI_OP_TRANSMIT_FILE:
      return taxi__nbio_transmit(op, c);
    case TAXI_OP_RECVFROM:
      return taxi__nbio_recvfrom(op, c);
    case TAXI_OP_SENDTO:
      return taxi__nbio_sendto(op, c);
    default:
      return TAXI_EINVAL;
  }
}

bool taxi__nbio_may_hide_error(const taxi_op_t *op, bool connect_started,
                               int64_t r) {
  if (op->kind == TAXI_OP_CONNECT) return connect_started && r == TAXI_EAGAIN;
  /* A connected datagram socket's ICMP error (port unreachable) woke the
   * handle, and reading it for the event cleared it: the receive or send
   * then finds nothing to do. */
  if (op->kind == TAXI_OP_RECVFROM || op->kind == TAXI_OP_SENDTO)
    return r == TAXI_EAGAIN;
  return op->kind == TAXI_OP_READ && r == 0 && taxi__op_remaining(op) > 0;
}
