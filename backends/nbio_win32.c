/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/nbio_win32.c - the steps of backends/nbio.h over Winsock and
 * Win32 files, for the emulated Proactor on Windows.
 *
 * Notes on the calls chosen:
 *  - Sockets: accept(), connect(), recv() and WSASend() (gathering, up to
 *    TAXI_OP_MAX_BUFS buffers per call) on sockets in non-blocking mode;
 *    WSAEWOULDBLOCK is TAXI_EAGAIN.  Winsock raises no SIGPIPE, so writes
 *    need no flag for that.  A non-blocking connect that fails is reported
 *    by select in its except set, which backends/select_win32.c turns
 *    into TAXI_EV_ERR for a socket watched for writing; the check then
 *    reads the error with getsockopt(SO_ERROR).
 *  - Files (HANDLEs): ReadFile/WriteFile at the operation's offset given
 *    in an OVERLAPPED, which works on handles opened with or without
 *    FILE_FLAG_OVERLAPPED; for the former the call may pend, and is then
 *    waited for at once (GetOverlappedResult) - a file step never asks for
 *    readiness.  The OVERLAPPED's event has its low bit set so that a
 *    handle associated with a completion port does not also queue a
 *    completion packet for this call.
 *  - Transmit-file: the header and trailer with send(); the file part read
 *    into a bounce buffer and sent (what the socket did not take is read
 *    again next step).  TransmitFile itself needs an overlapped call and
 *    belongs to a completion backend.
 *  - Non-socket stream handles (pipes) are read and written with plain
 *    ReadFile/WriteFile, which block; only sockets can be watched on
 *    Windows anyway.
 */
#include "config.h"

#include "backends/nbio.h"
#include "ports/win32/win32_impl.h"

#include <limits.h>
#include <string.h>

#include "taxi/handler.h"

/* recv/send take an int, ReadFile a DWORD: stay far below both. */
#define MAX_STEP ((size_t)1 << 30)

static void count(taxi__completion_counters_t *c) {
  if (c) atomic_fetch_add_explicit(&c->syscalls, 1, memory_order_relaxed);
}

/* The thread's last Winsock or Win32 error, as the step's result. */
static int64_t fail(DWORD e) {
  if (e == WSAEWOULDBLOCK) return TAXI_EAGAIN;
  return taxi__error_from_os((int)e);
}

static size_t cap_len(size_t len) { return len > MAX_STEP ? MAX_STEP : len; }

/* ---- accept, connect ----------------------------------------------------- */

int64_t taxi__nbio_accept(taxi_op_t *op, taxi__completion_counters_t *c) {
  struct sockaddr_storage ss;
  for (;;) {
    int len = sizeof ss;
    count(c);
    SOCKET s = accept((SOCKET)op->handle, (struct sockaddr *)&ss, &len);
    if (s == INVALID_SOCKET) {
      DWORD e = (DWORD)WSAGetLastError();
      /* A connection reset before it was accepted is not the listener's
       * failure: try the next one. */
      if (e == WSAECONNRESET || e == WSAEINTR) continue;
      return fail(e);
    }
    if ((size_t)len > sizeof op->peer) len = (int)sizeof op->peer;
    memcpy(op->peer, &ss, (size_t)len);
    op->peer_len = (unsigned)len;
    count(c);
    int rc = taxi__set_nonblocking((taxi_handle_t)s);
    if (rc == 0) {
      count(c);
      rc = taxi__set_cloexec((taxi_handle_t)s);
    }
    if (rc < 0) {
      closesocket(s);
      return rc;
    }
    return (int64_t)s;
  }
}

int64_t taxi__nbio_connect_start(taxi_op_t *op,
                                 taxi__completion_counters_t *c) {
  count(c);
  if (connect((SOCKET)op->handle, (const struct sockaddr *)op->internal_.addr,
              (int)op->internal_.addr_len) == 0)
    return 0;
  DWORD e = (DWORD)WSAGetLastError();
  if (e == WSAEWOULDBLOCK || e == WSAEINPROGRESS || e == WSAEALREADY)
    return TAXI_EAGAIN;
  return fail(e);
}

int64_t taxi__nbio_connect_check(taxi_op_t *op,
                                 taxi__completion_counters_t *c) {
  int err = 0, len = sizeof err;
  count(c);
  if (getsockopt((SOCKET)op->handle, SOL_SOCKET, SO_ERROR, (char *)&err,
                 &len) != 0)
    return fail((DWORD)WSAGetLastError());
  if (err == WSAEWOULDBLOCK || err == WSAEINPROGRESS || err == WSAEALREADY)
    return TAXI_EAGAIN;
  if (err != 0) return taxi__error_from_os(err);
  struct sockaddr_storage ss;
  len = sizeof ss;
  count(c);
  if (getpeername((SOCKET)op->handle, (struct sockaddr *)&ss, &len) == 0)
    return 0;
  if (WSAGetLastError() == WSAENOTCONN) return TAXI_EAGAIN;
  return fail((DWORD)WSAGetLastError());
}

/* ---- streams ---------------------------------------------------------------
 */

int64_t taxi__nbio_read(taxi_op_t *op, taxi__completion_counters_t *c) {
  taxi_buf_t b;
  if (taxi__op_remaining_bufs(op, &b, 1) == 0) return 0;
  size_t len = cap_len(b.len);
  /* A socket is the usual case: asking first what the handle is would
   * cost a second system call per step. */
  count(c);
  int n = recv((SOCKET)op->handle, b.base, (int)len, 0);
  if (n >= 0) return n;
  DWORD e = (DWORD)WSAGetLastError();
  if (e != WSAENOTSOCK) return fail(e);
  DWORD got = 0;
  count(c);
  if (ReadFile((HANDLE)op->handle, b.base, (DWORD)len, &got, NULL)) return got;
  /* A pipe whose writer closed: end of stream. */
  if (GetLastError() == ERROR_BROKEN_PIPE) return 0;
  return fail(GetLastError());
}

/* ---- datagrams ------------------------------------------------------------
 *
 * recvfrom and sendto, one datagram a step.  Windows says truncation with
 * WSAEMSGSIZE (the buffer filled), and an ICMP port unreachable with
 * WSAECONNRESET, which a datagram socket means as POSIX's ECONNREFUSED.
 */

int64_t taxi__nbio_recvfrom(taxi_op_t *op, taxi__completion_counters_t *c) {
  int cap = (int)cap_len(op->internal_.bufs[0].len);
  int alen = (int)sizeof op->peer;
  count(c);
  int n = recvfrom((SOCKET)op->handle, (char *)op->internal_.bufs[0].base, cap,
                   0, (struct sockaddr *)op->peer, &alen);
  op->msg_flags = 0;
  if (n == SOCKET_ERROR) {
    DWORD e = (DWORD)WSAGetLastError();
    if (e == WSAEMSGSIZE) {
      op->msg_flags = TAXI_MSG_TRUNCATED;
      n = cap;
    } else if (e == WSAECONNRESET) {
      taxi__set_os_error((int)e);
      return TAXI_ECONNREFUSED;
    } else {
      return fail(e);
    }
  }
  op->peer_len = (unsigned)alen;
  return n;
}

int64_t taxi__nbio_sendto(taxi_op_t *op, taxi__completion_counters_t *c) {
  count(c);
  int n = sendto((SOCKET)op->handle, (const char *)op->internal_.bufs[0].base,
                 (int)cap_len(op->internal_.bufs[0].len), 0,
                 op->internal_.addr_len
                     ? (const struct sockaddr *)op->internal_.addr
                     : NULL,
                 (int)op->internal_.addr_len);
  if (n != SOCKET_ERROR) return n;
  DWORD e = (DWORD)WSAGetLastError();
  if (e == WSAECONNRESET) {
    taxi__set_os_error((int)e);
    return TAXI_ECONNREFUSED;
  }
  return fail(e);
}

static int64_t send_bufs(taxi_handle_t h, const taxi_buf_t *bufs, size_t n,
                         taxi__completion_counters_t *c) {
  WSABUF wb[TAXI_OP_MAX_BUFS];
  size_t total = 0, k = 0;
  for (size_t i = 0; i < n && i < TAXI_OP_MAX_BUFS && total < MAX_STEP; i++) {
    size_t len = bufs[i].len;
    if (len > MAX_STEP - total) len = MAX_STEP - total;
    wb[k].buf = bufs[i].base;
    wb[k].len = (ULONG)len;
    total += len;
    k++;
  }
  if (k == 0) return 0;
  DWORD sent = 0;
  count(c);
  if (WSASend((SOCKET)h, wb, (DWORD)k, &sent, 0, NULL, NULL) == 0) return sent;
  DWORD e = (DWORD)WSAGetLastError();
  if (e != WSAENOTSOCK) return fail(e);
  /* Not a socket (see taxi__nbio_read): a plain write of the first. */
  DWORD wrote = 0;
  count(c);
  if (WriteFile((HANDLE)h, wb[0].buf, wb[0].len, &wrote, NULL)) return wrote;
  return fail(GetLastError());
}

int64_t taxi__nbio_write(taxi_op_t *op, taxi__completion_counters_t *c) {
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  size_t n = taxi__op_remaining_bufs(op, bufs, TAXI_OP_MAX_BUFS);
  return send_bufs(op->handle, bufs, n, c);
}

/* ---- files ------------------------------------------------------------------
 */

/* One ReadFile or WriteFile of len bytes at `offset`; waits if it pends. */
static int64_t file_io(HANDLE h, void *buf, size_t len, int64_t offset,
                       bool writing, taxi__completion_counters_t *c) {
  OVERLAPPED ov;
  DWORD n = 0;
  BOOL ok;
  HANDLE ev = CreateEventW(NULL, TRUE, FALSE, NULL);
  if (!ev) return taxi__last_error();
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((uint64_t)offset & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((uint64_t)offset >> 32);
  /* Low bit set: no completion packet even if h is on a port. */
  ov.hEvent = (HANDLE)((uintptr_t)ev | 1);
  count(c);
  ok = writing ? WriteFile(h, buf, (DWORD)cap_len(len), &n, &ov)
               : ReadFile(h, buf, (DWORD)cap_len(len), &n, &ov);
  if (!ok && GetLastError() == ERROR_IO_PENDING) {
    count(c);
    ok = GetOverlappedResult(h, &ov, &n, TRUE);
  }
  DWORD e = ok ? 0 : GetLastError();
  CloseHandle(ev);
  if (ok) return n;
  /* Reading at or past the end of an overlapped file. */
  if (!writing && e == ERROR_HANDLE_EOF) return 0;
  return fail(e);
}

int64_t taxi__nbio_pread(taxi_op_t *op, taxi__completion_counters_t *c) {
  taxi_buf_t b;
  if (taxi__op_remaining_bufs(op, &b, 1) == 0) return 0;
  return file_io((HANDLE)op->handle, b.base, b.len, taxi__op_file_offset(op),
                 false, c);
}

int64_t taxi__nbio_pwrite(taxi_op_t *op, taxi__completion_counters_t *c) {
  taxi_buf_t b;
  if (taxi__op_remaining_bufs(op, &b, 1) == 0) return 0;
  return file_io((HANDLE)op->handle, b.base, b.len, taxi__op_file_offset(op),
                 true, c);
}

/* ---- transmit-file ----------------------------------------------------------
 */

/* One chunk of the file range, read and sent. */
static int64_t send_file_part(taxi_op_t *op, taxi__completion_counters_t *c) {
  unsigned char chunk[16384];
  size_t left = taxi__op_tx_file_remaining(op);
  if (left > sizeof chunk) left = sizeof chunk;
  int64_t n = file_io((HANDLE)op->internal_.file, chunk, left,
                      taxi__op_file_offset(op), false, c);
  if (n <= 0) return n;
  taxi_buf_t b = {chunk, (size_t)n};
  return send_bufs(op->handle, &b, 1, c);
}

int64_t taxi__nbio_transmit(taxi_op_t *op, taxi__completion_counters_t *c) {
  taxi_buf_t b;
  switch (taxi__op_tx_part(op)) {
    case TAXI__TX_HEADER:
    case TAXI__TX_TRAILER:
      if (taxi__op_remaining_bufs(op, &b, 1) == 0) return 0;
      return send_bufs(op->handle, &b, 1, c);
    case TAXI__TX_FILE:
      return send_file_part(op, c);
    default:
      return 0;
  }
}

int taxi__nbio_is_file(taxi_handle_t h) {
  if (taxi__is_socket(h)) return 0;
  return GetFileType((HANDLE)h) == FILE_TYPE_DISK;
}
