/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/nbio.h - the non-blocking system-call steps that perform an
 * operation's remainder, shared by the completion backends that run on
 * readiness (emulated) or that take part of their work from a reactor
 * (aio: accept and connect).  The steps are backends/nbio.c on POSIX and
 * backends/nbio_win32.c on Windows; taxi__nbio_step() is the same
 * everywhere (backends/nbio_step.c).
 *
 * Each function performs ONE step of what is left of `op` (as described by
 * core/proactor/proactor_op.h: internal_.done out of internal_.total) and never
 * blocks on a handle made non-blocking.  It returns:
 *   >= 0          bytes transferred (ACCEPT: the new handle; CONNECT: 0),
 *                 0 from a read meaning end of stream;
 *   TAXI_EAGAIN   it would block: wait for readability (accept, read)
 *                 or writability (connect, write, transmit), then call
 *                 again;
 *   < 0           another TAXI_E* code (taxi__error_from_os()):
 *                 TAXI_ECONNRESET, TAXI_EPIPE, TAXI_ECONNREFUSED, ...
 * EINTR is retried inside.  None of them touches internal_.done: the core
 * accounts for what a step transferred when the completion arrives.
 *
 * `counters` (may be NULL) gets one syscall per system call made, so the
 * backends report honest numbers to taxi_proactor_stats().
 */
#ifndef TAXI_BACKENDS_NBIO_H
#define TAXI_BACKENDS_NBIO_H

#include "backends/completion.h"
#include "core/proactor/proactor_op.h"

#include <stdbool.h>
#include <stdint.h>

/* ACCEPT: accept one connection on op->handle, non-blocking and
 * close-on-exec; the peer's address goes to op->peer / op->peer_len.
 * Returns the new handle. */
int64_t taxi__nbio_accept(taxi_op_t *op, taxi__completion_counters_t *c);

/* CONNECT: start connecting op->handle to internal_.addr.  0 when
 * connected at once, TAXI_EAGAIN when in progress (wait for writability,
 * then taxi__nbio_connect_check()), or an error. */
int64_t taxi__nbio_connect_start(taxi_op_t *op, taxi__completion_counters_t *c);
/* CONNECT, after writability: 0 connected, TAXI_EAGAIN still in progress,
 * or the error the connection attempt ended with. */
int64_t taxi__nbio_connect_check(taxi_op_t *op, taxi__completion_counters_t *c);

/* READ: read into the remaining buffer (0 = end of stream). */
int64_t taxi__nbio_read(taxi_op_t *op, taxi__completion_counters_t *c);
/* WRITE: send the remaining buffers, gathering, without SIGPIPE. */
int64_t taxi__nbio_write(taxi_op_t *op, taxi__completion_counters_t *c);
/* RECVFROM: receive one datagram into bufs[0]; the sender's address goes
 * to op->peer / op->peer_len, truncation to op->msg_flags.  Returns its
 * length as far as the buffer holds it (0: an empty datagram).
 * SENDTO: send bufs[0] as one datagram to internal_.addr (addr_len 0:
 * the connected peer). */
int64_t taxi__nbio_recvfrom(taxi_op_t *op, taxi__completion_counters_t *c);
int64_t taxi__nbio_sendto(taxi_op_t *op, taxi__completion_counters_t *c);
/* READ_FILE / WRITE_FILE: pread / pwrite the remaining buffer at the
 * offset of the next byte (0 from pread = end of file). */
int64_t taxi__nbio_pread(taxi_op_t *op, taxi__completion_counters_t *c);
int64_t taxi__nbio_pwrite(taxi_op_t *op, taxi__completion_counters_t *c);
/* TRANSMIT_FILE: send the next part (header, file range with sendfile
 * where the OS has it, trailer).  0 from the file part means the file
 * ended before the range did. */
int64_t taxi__nbio_transmit(taxi_op_t *op, taxi__completion_counters_t *c);

/* The step for op's kind: accept, read, write, pread, pwrite, transmit,
 * or for CONNECT the start (connect_started false) or the check.  TIMER,
 * POST, NONE: TAXI_EINVAL. */
int64_t taxi__nbio_step(taxi_op_t *op, bool connect_started,
                        taxi__completion_counters_t *c);

/* Whether r, what a step of op returned, may stand for an error the
 * reactor reported with the handle's event rather than for what it says:
 * a read that found the end of the stream, a connect check that found the
 * attempt still in progress, a datagram receive or send that would block
 * (a connected socket's ICMP error woke it).  Where reporting the error cleared
 * it from the socket (libkqueue), the step cannot see it; the caller then asks
 * taxi_reactor_pending_error() and completes op with the error if there
 * is one. */
bool taxi__nbio_may_hide_error(const taxi_op_t *op, bool connect_started,
                               int64_t r);

/* 1 if h is a regular file (or a block device): such handles are always
 * "ready" and cannot be watched by epoll, so their reads and writes are
 * performed at once.  0 otherwise or if it cannot tell. */
int taxi__nbio_is_file(taxi_handle_t h);

#endif /* TAXI_BACKENDS_NBIO_H */
