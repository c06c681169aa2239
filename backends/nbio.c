/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/nbio.c - one non-blocking system call per step of an
 * operation's remainder (see backends/nbio.h).  POSIX.
 *
 * Notes on the calls chosen:
 *  - accept4(SOCK_NONBLOCK | SOCK_CLOEXEC) where the system has it (Linux,
 *    FreeBSD >= 10, NetBSD, OpenBSD, DragonFly); elsewhere (macOS) accept()
 *    and two fcntl() calls, counted as system calls too.
 *  - Writes use sendmsg(MSG_NOSIGNAL) so a peer that went away gives EPIPE
 *    instead of killing the process with SIGPIPE.  macOS lacks
 *    MSG_NOSIGNAL; there SO_NOSIGPIPE is set on the socket once, on first
 *    write.  A handle that is not a socket (a pipe) falls back to writev().
 *  - Reads use readv() (one buffer), which works on sockets and pipes alike.
 *  - The file part of a transmit-file uses Linux sendfile(2), which copies
 *    in the kernel; elsewhere pread() into a bounce buffer and send() what
 *    was read (the bytes the socket did not take are read again next step).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* accept4, SOCK_NONBLOCK, MSG_NOSIGNAL, pread */
#endif
#include "config.h"

#include "backends/nbio.h"
#include "ports/port.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/sendfile.h>
#endif

#include "taxi/handler.h"

/* The largest single transfer asked of the kernel: read/write return a
 * ssize_t, and Linux caps one call at about 2 GiB anyway. */
#define MAX_STEP ((size_t)1 << 30)

static void count(taxi__completion_counters_t *c) {
  if (c) atomic_fetch_add_explicit(&c->syscalls, 1, memory_order_relaxed);
}

/* An errno after a failed call, as the step's result. */
static int64_t fail(int e) {
  if (e == EAGAIN
#if defined(EWOULDBLOCK) && EWOULDBLOCK != EAGAIN
      || e == EWOULDBLOCK
#endif
  )
    return TAXI_EAGAIN;
  return taxi__error_from_os(e);
}

static int64_t done_or_fail(ssize_t n) {
  return n >= 0 ? (int64_t)n : fail(errno);
}

/* Convert at most `max` remaining buffers into iovecs, capping the total so
 * the result fits a ssize_t. */
static int to_iov(const taxi_op_t *op, struct iovec *iov, size_t max) {
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  if (max > TAXI_OP_MAX_BUFS) max = TAXI_OP_MAX_BUFS;
  size_t n = taxi__op_remaining_bufs(op, bufs, max), total = 0;
  int k = 0;
  for (size_t i = 0; i < n && total < MAX_STEP; i++) {
    size_t len = bufs[i].len;
    if (len > MAX_STEP - total) len = MAX_STEP - total;
    iov[k].iov_base = bufs[i].base;
    iov[k].iov_len = len;
    total += len;
    k++;
  }
  return k;
}

/* ---- accept, connect ----------------------------------------------------- */

static int64_t finish_accepted(int fd, taxi__completion_counters_t *c) {
#if !(defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC))
  count(c);
  count(c);
  int rc = taxi__set_nonblocking(fd);
  if (rc == 0) rc = taxi__set_cloexec(fd);
  if (rc < 0) {
    close(fd);
    return rc;
  }
#else
  (void)c;
#endif
  return fd;
}

int64_t taxi__nbio_accept(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct sockaddr_storage ss;
  for (;;) {
    socklen_t len = sizeof ss;
    int fd;
    count(c);
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
    fd = accept4(op->handle, (struct sockaddr *)&ss, &len,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    fd = accept(op->handle, (struct sockaddr *)&ss, &len);
#endif
    if (fd < 0) {
      int e = errno;
      if (e == EINTR) continue;
      /* A connection reset before it was accepted is not the listener's
       * failure: try the next one (Linux reports ECONNABORTED). */
      if (e == ECONNABORTED) continue;
      return fail(e);
    }
    if (len > sizeof op->peer) len = sizeof op->peer;
    memcpy(op->peer, &ss, len);
    op->peer_len = (unsigned)len;
    return finish_accepted(fd, c);
  }
}

int64_t taxi__nbio_connect_start(taxi_op_t *op,
                                 taxi__completion_counters_t *c) {
  count(c);
  if (connect(op->handle, (const struct sockaddr *)op->internal_.addr,
              (socklen_t)op->internal_.addr_len) == 0)
    return 0;
  int e = errno;
  /* EINTR: the connection goes on in the background, as EINPROGRESS. */
  if (e == EINPROGRESS || e == EINTR || e == EAGAIN) return TAXI_EAGAIN;
  return fail(e);
}

int64_t taxi__nbio_connect_check(taxi_op_t *op,
                                 taxi__completion_counters_t *c) {
  int err = 0;
  socklen_t len = sizeof err;
  count(c);
  if (getsockopt(op->handle, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
    return fail(errno);
  if (err == EINPROGRESS || err == EALREADY) return TAXI_EAGAIN;
  if (err != 0) return taxi__error_from_os(err);
  /* SO_ERROR is 0 both when connected and while still connecting on some
   * systems: ask the peer's name to tell them apart. */
  struct sockaddr_storage ss;
  len = sizeof ss;
  count(c);
  if (getpeername(op->handle, (struct sockaddr *)&ss, &len) == 0) return 0;
  if (errno == ENOTCONN) return TAXI_EAGAIN;
  return fail(errno);
}

/* ---- streams ---------------------------------------------------------------
 */

int64_t taxi__nbio_read(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov[1];
  if (to_iov(op, iov, 1) == 0) return 0;
  for (;;) {
    count(c);
    ssize_t n = readv(op->handle, iov, 1);
    if (n < 0 && errno == EINTR) continue;
    return done_or_fail(n);
  }
}

static int64_t send_iov(taxi_handle_t h, struct iovec *iov, int n,
                        taxi__completion_counters_t *c) {
  /* One buffer goes out with send() (ports/posix/sock.c says what that
   * saves), without the msghdr. */
  struct msghdr msg;
  if (n != 1) {
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n;
  }
  int flags = 0;
#if defined(MSG_NOSIGNAL)
  flags = MSG_NOSIGNAL;
#elif defined(SO_NOSIGPIPE)
  {
    int on = 1;
    count(c);
    setsockopt(h, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
  }
#endif
  for (;;) {
    count(c);
    ssize_t r = n == 1 ? send(h, iov[0].iov_base, iov[0].iov_len, flags)
                       : sendmsg(h, &msg, flags);
    if (r >= 0) return r;
    int e = errno;
    if (e == EINTR) continue;
    if (e != ENOTSOCK) return fail(e);
    /* Not a socket: a pipe, say.  SIGPIPE is the application's to
     * handle there, as with any write to a pipe. */
    for (;;) {
      count(c);
      r = writev(h, iov, n);
      if (r < 0 && errno == EINTR) continue;
      return done_or_fail(r);
    }
  }
}

int64_t taxi__nbio_write(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov[TAXI_OP_MAX_BUFS];
  int n = to_iov(op, iov, TAXI_OP_MAX_BUFS);
  if (n == 0) return 0;
  return send_iov(op->handle, iov, n, c);
}

/* ---- datagrams
 * ---------------------------------------------------------------
 *
 * One datagram a step, whole: recvmsg for the sender's address and
 * MSG_TRUNC, sendmsg for the destination (none: the connected peer).
 */

int64_t taxi__nbio_recvfrom(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov = {op->internal_.bufs[0].base,
                      op->internal_.bufs[0].len > MAX_STEP
                          ? MAX_STEP
                          : op->internal_.bufs[0].len};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_name = op->peer;
  msg.msg_namelen = (socklen_t)sizeof op->peer;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  for (;;) {
    count(c);
    ssize_t n = recvmsg(op->handle, &msg, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) {
      op->peer_len = (unsigned)msg.msg_namelen;
      op->msg_flags = (msg.msg_flags & MSG_TRUNC) ? TAXI_MSG_TRUNCATED : 0u;
    }
    return done_or_fail(n);
  }
}

int64_t taxi__nbio_sendto(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov = {op->internal_.bufs[0].base, op->internal_.bufs[0].len};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  if (op->internal_.addr_len) {
    msg.msg_name = op->internal_.addr;
    msg.msg_namelen = (socklen_t)op->internal_.addr_len;
  }
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  int flags = 0;
#if defined(MSG_NOSIGNAL)
  flags = MSG_NOSIGNAL;
#endif
  for (;;) {
    count(c);
    ssize_t n = sendmsg(op->handle, &msg, flags);
    if (n < 0 && errno == EINTR) continue;
    return done_or_fail(n);
  }
}

/* ---- files ------------------------------------------------------------------
 */

int64_t taxi__nbio_pread(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov[1];
  if (to_iov(op, iov, 1) == 0) return 0;
  for (;;) {
    count(c);
    ssize_t n = pread(op->handle, iov[0].iov_base, iov[0].iov_len,
                      (off_t)taxi__op_file_offset(op));
    if (n < 0 && errno == EINTR) continue;
    return done_or_fail(n);
  }
}

int64_t taxi__nbio_pwrite(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov[1];
  if (to_iov(op, iov, 1) == 0) return 0;
  for (;;) {
    count(c);
    ssize_t n = pwrite(op->handle, iov[0].iov_base, iov[0].iov_len,
                       (off_t)taxi__op_file_offset(op));
    if (n < 0 && errno == EINTR) continue;
    return done_or_fail(n);
  }
}

/* ---- transmit-file ----------------------------------------------------------
 */

#if defined(__linux__)
static int64_t send_file_part(taxi_op_t *op, taxi__completion_counters_t *c) {
  size_t left = taxi__op_tx_file_remaining(op);
  if (left > MAX_STEP) left = MAX_STEP;
  off_t off = (off_t)taxi__op_file_offset(op);
  for (;;) {
    count(c);
    ssize_t n = sendfile(op->handle, op->internal_.file, &off, left);
    if (n < 0 && errno == EINTR) continue;
    return done_or_fail(n);
  }
}
#else
/* Without a sendfile of known semantics: read a chunk, send what the
 * socket takes.  The socket is checked for room first so that a full
 * socket costs one system call, not a wasted read. */
static int64_t send_file_part(taxi_op_t *op, taxi__completion_counters_t *c) {
  unsigned char chunk[16384];
  size_t left = taxi__op_tx_file_remaining(op);
  if (left > sizeof chunk) left = sizeof chunk;
  ssize_t n;
  do {
    count(c);
    n = pread(op->internal_.file, chunk, left, (off_t)taxi__op_file_offset(op));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return done_or_fail(n);
  struct iovec iov = {chunk, (size_t)n};
  return send_iov(op->handle, &iov, 1, c);
}
#endif

int64_t taxi__nbio_transmit(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct iovec iov[1];
  switch (taxi__op_tx_part(op)) {
    case TAXI__TX_HEADER:
    case TAXI__TX_TRAILER:
      if (to_iov(op, iov, 1) == 0) return 0;
      return send_iov(op->handle, iov, 1, c);
    case TAXI__TX_FILE:
      return send_file_part(op, c);
    default:
      return 0;
  }
}

int taxi__nbio_is_file(taxi_handle_t h) {
  struct stat st;
  if (fstat(h, &st) == -1) return 0;
  return S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
}
