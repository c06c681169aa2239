/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/iocp.c - the completion backend over a Windows I/O completion
 * port: every operation is an overlapped call whose completion packet the
 * port queues; wait dequeues packets with GetQueuedCompletionStatusEx.
 *
 * Every started call yields exactly one completion (a call that fails at
 * once queues none, and its error is submit()'s result); several threads
 * may wait on the port at once (TAXI__PCAP_MULTI_WAIT); cancellation is
 * CancelIoEx, whose aborted packet is the completion.  The call each
 * operation makes, the extension functions and wine:
 * docs/backends/iocp.md.  Quirks met under wine are noted where handled.
 */
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_IOCP

#include "backends/completion.h"
#include "core/common/alloc.h"
#include "core/proactor/proactor_op.h"
#include "ports/win32/win32_impl.h"

#include <limits.h>
#include <mswsock.h>
#include <string.h>

/* AcceptEx wants 16 bytes more than the largest address, for each of the
 * local and the remote address. */
#define ADDR_ROOM (sizeof(struct sockaddr_in6) + 16)

typedef struct iocp_op {
  OVERLAPPED ov;
  taxi_op_t *op;
  SOCKET accepted; /* ACCEPT: the socket AcceptEx fills */
  char addrs[2 * ADDR_ROOM];
  INT from_len; /* RECVFROM: WSARecvFrom writes the sender's length here */
  DWORD flags;  /* RECVFROM: its flags, in and out */
} iocp_op_t;

_Static_assert(sizeof(iocp_op_t) <= TAXI_OP_BACKEND_SIZE,
               "iocp_op_t must fit the operation record's backend room");

#define WAKE_KEY ((ULONG_PTR)1)
#define BATCH 64

typedef struct iocp {
  HANDLE port;
  taxi__completion_counters_t *counters;
  atomic_int waiters;
} iocp_t;

/* ---- extension functions --------------------------------------------------
 */

static LPFN_ACCEPTEX accept_ex;
static LPFN_CONNECTEX connect_ex;
static LPFN_GETACCEPTEXSOCKADDRS get_sockaddrs;
static LPFN_TRANSMITFILE transmit_file;
static INIT_ONCE ext_once = INIT_ONCE_STATIC_INIT;
static int ext_error;

static int load_one(SOCKET s, GUID guid, void *fn, size_t size) {
  DWORD n = 0;
  if (WSAIoctl(s, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, sizeof guid, fn,
               (DWORD)size, &n, NULL, NULL) != 0)
    return WSAGetLastError();
  return 0;
}

static BOOL CALLBACK load_extensions(PINIT_ONCE once, void *param, void **c) {
  (void)once;
  (void)param;
  (void)c;
  SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s == INVALID_SOCKET) {
    ext_error = WSAGetLastError();
    return TRUE;
  }
  GUID a = WSAID_ACCEPTEX, ce = WSAID_CONNECTEX, g = WSAID_GETACCEPTEXSOCKADDRS,
       t = WSAID_TRANSMITFILE;
  ext_error = load_one(s, a, &accept_ex, sizeof accept_ex);
  if (!ext_error) ext_error = load_one(s, ce, &connect_ex, sizeof connect_ex);
  if (!ext_error)
    ext_error = load_one(s, g, &get_sockaddrs, sizeof get_sockaddrs);
  if (!ext_error)
    ext_error = load_one(s, t, &transmit_file, sizeof transmit_file);
  closesocket(s);
  return TRUE;
}

/* ---- helpers
 * -----------------------------------------------------------------
 */

static iocp_op_t *iop(taxi_op_t *op) { return taxi__op_backend(op); }

static void count(iocp_t *io) {
  if (io->counters)
    atomic_fetch_add_explicit(&io->counters->syscalls, 1, memory_order_relaxed);
}

static void prepare(taxi_op_t *op, int64_t offset) {
  iocp_op_t *o = iop(op);
  memset(&o->ov, 0, sizeof o->ov);
  o->ov.Offset = (DWORD)((uint64_t)offset & 0xffffffffu);
  o->ov.OffsetHigh = (DWORD)((uint64_t)offset >> 32);
  o->op = op;
}

/* After an overlapped call returned `ok`: 0 when a packet will come, or
 * the error it failed with at once. */
static int started(BOOL ok, DWORD err) {
  if (ok || err == ERROR_IO_PENDING || err == WSA_IO_PENDING) return 0;
  return taxi__error_from_os((int)err);
}

/* ---- open, close, attach ---------------------------------------------------
 */

static int iocp_open(void **state, const char *variant,
                     const taxi_proactor_options_t *opts,
                     taxi__completion_counters_t *counters) {
  (void)opts;
  if (variant) return TAXI_ENOBACKEND;
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  InitOnceExecuteOnce(&ext_once, load_extensions, NULL, NULL);
  if (ext_error) {
    taxi__set_os_error(ext_error);
    return TAXI_ENOTSUP;
  }
  iocp_t *io = taxi__calloc(1, sizeof *io);
  if (!io) return TAXI_ENOMEM;
  io->port = CreateIoCompletionPort(INVALID_HANDLE_VALUE, NULL, 0, 0);
  if (!io->port) {
    rc = taxi__last_error();
    taxi__free(io);
    return rc;
  }
  io->counters = counters;
  atomic_init(&io->waiters, 0);
  *state = io;
  return 0;
}

static void iocp_close(void *state) {
  iocp_t *io = state;
  if (!io) return;
  CloseHandle(io->port);
  taxi__free(io);
}

static int iocp_attach(void *state, taxi_handle_t h) {
  iocp_t *io = state;
  count(io);
  if (!CreateIoCompletionPort((HANDLE)h, io->port, 0, 0)) {
    DWORD e = GetLastError();
    /* Already on a port (this one, from an earlier attach, or another):
     * a handle cannot leave a port, so this is as good as it gets for
     * this one and an error for another; Windows cannot tell them apart
     * here, so both are accepted. */
    if (e == ERROR_INVALID_PARAMETER) return 0;
    return taxi__error_from_os((int)e);
  }
  return 0;
}

/* A handle stays associated with its port until it is closed. */
static void iocp_detach(void *state, taxi_handle_t h) {
  (void)state;
  (void)h;
}

/* ---- submit ----------------------------------------------------------------
 */

static int family_of(SOCKET s) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (getsockname(s, (struct sockaddr *)&ss, &len) != 0) return AF_INET;
  return ss.ss_family;
}

static int submit_accept(iocp_t *io, taxi_op_t *op) {
  iocp_op_t *o = iop(op);
  SOCKET lst = (SOCKET)op->handle;
  prepare(op, 0);
  count(io);
  o->accepted = WSASocketW(family_of(lst), SOCK_STREAM, IPPROTO_TCP, NULL, 0,
                           WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (o->accepted == INVALID_SOCKET) return taxi__last_error();
  DWORD n = 0;
  count(io);
  BOOL ok = accept_ex(lst, o->accepted, o->addrs, 0, ADDR_ROOM, ADDR_ROOM, &n,
                      &o->ov);
  int rc = started(ok, ok ? 0 : (DWORD)WSAGetLastError());
  if (rc < 0) {
    closesocket(o->accepted);
    o->accepted = INVALID_SOCKET;
  }
  return rc;
}

static int submit_connect(iocp_t *io, taxi_op_t *op) {
  iocp_op_t *o = iop(op);
  SOCKET s = (SOCKET)op->handle;
  const struct sockaddr *to = (const struct sockaddr *)op->internal_.addr;
  struct sockaddr_storage any;
  memset(&any, 0, sizeof any);
  any.ss_family = to->sa_family;
  /* ConnectEx refuses an unbound socket; WSAEINVAL: bound already. */
  count(io);
  if (bind(s, (struct sockaddr *)&any,
           to->sa_family == AF_INET6 ? (int)sizeof(struct sockaddr_in6)
                                     : (int)sizeof(struct sockaddr_in)) != 0 &&
      WSAGetLastError() != WSAEINVAL)
    return taxi__last_error();
  prepare(op, 0);
  count(io);
  BOOL ok =
      connect_ex(s, to, (int)op->internal_.addr_len, NULL, 0, NULL, &o->ov);
  return started(ok, ok ? 0 : (DWORD)WSAGetLastError());
}

/* The remaining buffers as WSABUFs; how many. */
static DWORD to_wsabufs(const taxi_op_t *op, WSABUF *wb, size_t max) {
  taxi_buf_t bufs[TAXI_OP_MAX_BUFS];
  size_t n = taxi__op_remaining_bufs(op, bufs, max), total = 0;
  DWORD k = 0;
  for (size_t i = 0; i < n && total < ((size_t)1 << 30); i++) {
    size_t len = bufs[i].len;
    if (len > ((size_t)1 << 30) - total) len = ((size_t)1 << 30) - total;
    wb[k].buf = bufs[i].base;
    wb[k].len = (ULONG)len;
    total += len;
    k++;
  }
  return k;
}

static int submit_recv(iocp_t *io, taxi_op_t *op) {
  WSABUF wb[1];
  DWORD flags = 0;
  DWORD n = to_wsabufs(op, wb, 1);
  if (n == 0) return TAXI_EINVAL;
  prepare(op, 0);
  count(io);
  int r = WSARecv((SOCKET)op->handle, wb, n, NULL, &flags, &iop(op)->ov, NULL);
  return started(r == 0, r == 0 ? 0 : (DWORD)WSAGetLastError());
}

static int submit_send(iocp_t *io, taxi_op_t *op) {
  WSABUF wb[TAXI_OP_MAX_BUFS];
  DWORD n = to_wsabufs(op, wb, TAXI_OP_MAX_BUFS);
  if (n == 0) return TAXI_EINVAL;
  prepare(op, 0);
  count(io);
  int r = WSASend((SOCKET)op->handle, wb, n, NULL, 0, &iop(op)->ov, NULL);
  return started(r == 0, r == 0 ? 0 : (DWORD)WSAGetLastError());
}

/* One datagram: the buffer whole, the sender's address into op->peer
 * (its length in the backend room, which outlives the call); the
 * destination of a send where a connect keeps its address (none: the
 * connected peer). */
static int submit_dgram(iocp_t *io, taxi_op_t *op) {
  iocp_op_t *o = iop(op);
  WSABUF wb;
  size_t len = op->internal_.bufs[0].len;
  if (len > (size_t)INT_MAX) return TAXI_EMSGSIZE;
  wb.buf = (char *)op->internal_.bufs[0].base;
  wb.len = (ULONG)len;
  prepare(op, 0);
  count(io);
  int r;
  if (op->kind == TAXI_OP_RECVFROM) {
    o->from_len = (INT)sizeof op->peer;
    o->flags = 0;
    r = WSARecvFrom((SOCKET)op->handle, &wb, 1, NULL, &o->flags,
                    (struct sockaddr *)op->peer, &o->from_len, &o->ov, NULL);
  } else {
    r = WSASendTo((SOCKET)op->handle, &wb, 1, NULL, 0,
                  op->internal_.addr_len
                      ? (const struct sockaddr *)op->internal_.addr
                      : NULL,
                  (int)op->internal_.addr_len, &o->ov, NULL);
  }
  return started(r == 0, r == 0 ? 0 : (DWORD)WSAGetLastError());
}

static int submit_file(iocp_t *io, taxi_op_t *op, bool writing) {
  WSABUF wb[1];
  if (to_wsabufs(op, wb, 1) == 0) return TAXI_EINVAL;
  prepare(op, taxi__op_file_offset(op));
  count(io);
  BOOL ok = writing ? WriteFile((HANDLE)op->handle, wb[0].buf, wb[0].len, NULL,
                                &iop(op)->ov)
                    : ReadFile((HANDLE)op->handle, wb[0].buf, wb[0].len, NULL,
                               &iop(op)->ov);
  DWORD e = ok ? 0 : GetLastError();
  /* Reading at the end of a file fails at once on some systems: a
   * completion of 0 bytes, posted by hand so it comes through wait. */
  if (!ok && !writing && e == ERROR_HANDLE_EOF) {
    count(io);
    if (PostQueuedCompletionStatus(io->port, 0, 0, &iop(op)->ov)) return 0;
    return taxi__last_error();
  }
  return started(ok, e);
}

static int submit_transmit(iocp_t *io, taxi_op_t *op) {
  taxi__tx_part_t part = taxi__op_tx_part(op);
  if (part == TAXI__TX_TRAILER) return submit_send(io, op);
  if (part == TAXI__TX_DONE) return TAXI_EINVAL;
  TRANSMIT_FILE_BUFFERS tfb;
  WSABUF head[1];
  memset(&tfb, 0, sizeof tfb);
  if (part == TAXI__TX_HEADER && to_wsabufs(op, head, 1) == 1) {
    tfb.Head = head[0].buf;
    tfb.HeadLength = head[0].len;
  }
  const taxi_buf_t *tr = &op->internal_.bufs[TAXI__OP_TRAILER];
  if (tr->len > 0 && tr->len < ((size_t)1 << 30)) {
    tfb.Tail = tr->base;
    tfb.TailLength = (DWORD)tr->len;
  }
  size_t left = taxi__op_tx_file_remaining(op);
  /* TransmitFile sends at most 2^31 - 2 file bytes per call; the core
   * submits the rest. */
  if (left > 0x7ffffffe) {
    left = 0x7ffffffe;
    tfb.Tail = NULL;
    tfb.TailLength = 0;
  }
  int64_t off =
      part == TAXI__TX_HEADER ? op->internal_.offset : taxi__op_file_offset(op);
  prepare(op, off);
  /* A zero-length range means "the whole file" to TransmitFile: send no
   * file then. */
  HANDLE file = left ? (HANDLE)op->internal_.file : NULL;
  /* Wine (8.0) starts at the file pointer, not at the OVERLAPPED's
   * offset as Windows does for an overlapped file: set both.  Only under
   * wine does that make two transmits of one file at once race. */
  if (file) {
    LARGE_INTEGER at;
    at.QuadPart = off;
    count(io);
    (void)SetFilePointerEx(file, at, NULL, FILE_BEGIN);
  }
  count(io);
  BOOL ok =
      transmit_file((SOCKET)op->handle, file, (DWORD)left, 0, &iop(op)->ov,
                    (tfb.Head || tfb.Tail) ? &tfb : NULL, 0);
  return started(ok, ok ? 0 : (DWORD)WSAGetLastError());
}

static int iocp_submit(void *state, taxi_op_t *op) {
  iocp_t *io = state;
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
      return submit_accept(io, op);
    case TAXI_OP_CONNECT:
      return submit_connect(io, op);
    case TAXI_OP_READ:
      return submit_recv(io, op);
    case TAXI_OP_WRITE:
      return submit_send(io, op);
    case TAXI_OP_READ_FILE:
      return submit_file(io, op, false);
    case TAXI_OP_WRITE_FILE:
      return submit_file(io, op, true);
    case TAXI_OP_TRANSMIT_FILE:
      return submit_transmit(io, op);
    case TAXI_OP_RECVFROM:
    case TAXI_OP_SENDTO:
      return submit_dgram(io, op);
    default:
      return TAXI_EINVAL;
  }
}

static int iocp_cancel(void *state, taxi_op_t *op) {
  iocp_t *io = state;
  count(io);
  /* ERROR_NOT_FOUND: the call has completed and its packet is queued or
   * taken; it still arrives as the completion. */
  (void)CancelIoEx((HANDLE)op->handle, &iop(op)->ov);
  return 0;
}

/* ---- wait ------------------------------------------------------------------
 */

/* The result of op's finished call, from its OVERLAPPED. */
static int64_t finish(iocp_t *io, taxi_op_t *op) {
  iocp_op_t *o = iop(op);
  DWORD n = 0;
  HANDLE h = (HANDLE)op->handle;
  /* Not a system call: with the packet dequeued the call is over, and
   * GetOverlappedResult only reads the status and byte count the kernel
   * left in the OVERLAPPED, translated to a Win32 error. */
  if (!GetOverlappedResult(h, &o->ov, &n, FALSE)) {
    DWORD e = GetLastError();
    if (op->kind == TAXI_OP_ACCEPT && o->accepted != INVALID_SOCKET) {
      closesocket(o->accepted);
      o->accepted = INVALID_SOCKET;
    }
    if (e == ERROR_HANDLE_EOF) return 0; /* a file read at its end */
    if (op->kind == TAXI_OP_RECVFROM &&
        (e == ERROR_MORE_DATA || e == (DWORD)WSAEMSGSIZE)) {
      /* Longer than the buffer, which holds its start: truncated. */
      op->msg_flags = TAXI_MSG_TRUNCATED;
      op->peer_len = (unsigned)o->from_len;
      return n;
    }
    /* A datagram socket's port unreachable (an ICMP error; Windows
     * reports it on unconnected sockets too) is POSIX's ECONNREFUSED. */
    if ((op->kind == TAXI_OP_RECVFROM || op->kind == TAXI_OP_SENDTO) &&
        (e == ERROR_PORT_UNREACHABLE || e == (DWORD)WSAECONNRESET ||
         e == ERROR_NETNAME_DELETED || e == ERROR_CONNECTION_REFUSED)) {
      taxi__set_os_error((int)e);
      return TAXI_ECONNREFUSED;
    }
    /* A send cancelled after part of it went out reports that part: the
     * core then completes it as cancelled with those bytes counted, so
     * the application knows where the stream stands. */
    if (e == ERROR_OPERATION_ABORTED)
      return n > 0 && op->kind != TAXI_OP_ACCEPT ? (int64_t)n : TAXI_ECANCELED;
    return taxi__error_from_os((int)e);
  }
  switch (op->kind) {
    case TAXI_OP_ACCEPT: {
      SOCKET s = o->accepted, lst = (SOCKET)op->handle;
      o->accepted = INVALID_SOCKET;
      count(io);
      if (setsockopt(s, SOL_SOCKET, SO_UPDATE_ACCEPT_CONTEXT, (char *)&lst,
                     sizeof lst) != 0) {
        int rc = taxi__last_error();
        closesocket(s);
        return rc;
      }
      struct sockaddr *local = NULL, *peer = NULL;
      int llen = 0, plen = 0;
      get_sockaddrs(o->addrs, 0, ADDR_ROOM, ADDR_ROOM, &local, &llen, &peer,
                    &plen);
      if (peer && plen > 0) {
        if ((size_t)plen > sizeof op->peer) plen = (int)sizeof op->peer;
        memcpy(op->peer, peer, (size_t)plen);
        op->peer_len = (unsigned)plen;
      }
      /* Non-blocking, as taxi promises of accepted handles (operations
       * on it are overlapped anyway). */
      (void)taxi__set_nonblocking((taxi_handle_t)s);
      return (int64_t)s;
    }
    case TAXI_OP_CONNECT:
      count(io);
      if (setsockopt((SOCKET)op->handle, SOL_SOCKET, SO_UPDATE_CONNECT_CONTEXT,
                     NULL, 0) != 0)
        return taxi__last_error();
      return 0;
    case TAXI_OP_RECVFROM:
      op->peer_len = (unsigned)o->from_len;
      return n;
    default:
      return n;
  }
}

static int iocp_wait(void *state, taxi__completion_t *out, size_t max,
                     int timeout_ms) {
  iocp_t *io = state;
  OVERLAPPED_ENTRY entries[BATCH];
  ULONG got = 0;
  if (!out || max == 0) return TAXI_EINVAL;
  if (max > BATCH) max = BATCH;
  if (io->counters) {
    atomic_fetch_add_explicit(&io->counters->waits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&io->counters->syscalls, 1, memory_order_relaxed);
  }
  atomic_fetch_add(&io->waiters, 1);
  BOOL ok = GetQueuedCompletionStatusEx(
      io->port, entries, (ULONG)max, &got,
      timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms, FALSE);
  atomic_fetch_sub(&io->waiters, 1);
  if (!ok) {
    DWORD e = GetLastError();
    if (e == WAIT_TIMEOUT || e == ERROR_TIMEOUT) return 0;
    return taxi__error_from_os((int)e);
  }
  size_t k = 0;
  for (ULONG i = 0; i < got; i++) {
    if (entries[i].lpCompletionKey == WAKE_KEY || !entries[i].lpOverlapped)
      continue;
    iocp_op_t *o = CONTAINING_RECORD(entries[i].lpOverlapped, iocp_op_t, ov);
    out[k].op = o->op;
    out[k].result = finish(io, o->op);
    out[k].flags = 0;
    k++;
  }
  return (int)k;
}

static void iocp_wake(void *state, int all) {
  iocp_t *io = state;
  int n = all ? atomic_load(&io->waiters) : 1;
  if (n < 1) n = 1;
  for (int i = 0; i < n; i++) {
    count(io);
    (void)PostQueuedCompletionStatus(io->port, 0, WAKE_KEY, NULL);
  }
}

const taxi__completion_ops_t taxi__completion_iocp = {
    .name = "iocp",
    .caps = TAXI__PCAP_MULTI_WAIT | TAXI__PCAP_NO_MOVE,
    .open = iocp_open,
    .close = iocp_close,
    .attach = iocp_attach,
    .detach = iocp_detach,
    .submit = iocp_submit,
    .cancel = iocp_cancel,
    .wait = iocp_wait,
    .wake = iocp_wake,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__completion_iocp_absent;
#endif /* TAXI_HAVE_IOCP */
