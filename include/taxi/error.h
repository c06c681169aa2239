/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/error.h - error codes.
 *
 * Every taxi function that can fail returns 0 (or a non-negative count) on
 * success and one of the negative TAXI_E* codes below on failure.  The codes
 * are the same on every platform; the operating system's own error number, if
 * one was involved, can be read back with taxi_last_os_error() in the thread
 * that got the error.
 */
#ifndef TAXI_ERROR_H
#define TAXI_ERROR_H

#include "platform.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TAXI_OK 0 /* success */
/* An argument is invalid (NULL, out of range). */
#define TAXI_EINVAL (-1)
/* The allocator returned NULL. */
#define TAXI_ENOMEM (-2)
/* The handle is invalid or already closed. */
#define TAXI_EBADF (-3)
/* The handle or handler is already registered. */
#define TAXI_EEXIST (-4)
/* The handle, handler or timer is not registered. */
#define TAXI_ENOENT (-5)
/* No backend of that name is compiled in and works. */
#define TAXI_ENOBACKEND (-6)
/* The backend cannot do this. */
#define TAXI_ENOTSUP (-7)
/* Beyond the backend's limit (e.g. FD_SETSIZE). */
#define TAXI_ETOOMANY (-8)
/* The time limit passed before anything happened. */
#define TAXI_ETIMEDOUT (-9)
/* The reactor (or pool) was stopped. */
#define TAXI_ESTOPPED (-10)
/* In use elsewhere (another dispatcher, signal). */
#define TAXI_EBUSY (-11)
/* The operation was cancelled. */
#define TAXI_ECANCELED (-12)
/* Try again: would block. */
#define TAXI_EAGAIN (-13)
/* Not permitted (by the OS or in this state). */
#define TAXI_EPERM (-14)
/* Another OS error: see taxi_last_os_error(). */
#define TAXI_ESYS (-15)
/* Connection reset by peer. */
#define TAXI_ECONNRESET (-16)
/* Connection refused. */
#define TAXI_ECONNREFUSED (-17)
/* Writing to a connection the peer has closed. */
#define TAXI_EPIPE (-18)
/* Address already in use. */
#define TAXI_EADDRINUSE (-19)
/* End of stream before the operation completed. */
#define TAXI_EEOF (-20)
/* A malformed address string (see taxi_addr_parse() in taxi/addr.h). */
#define TAXI_EBADADDR (-21)

/* A message longer than the room given for it (a reply larger than its
 * record's buffer, a frame larger than a read buffer: taxi/lf_bound.h). */
#define TAXI_EMSGSIZE (-22)

/* Out of buffers or records: every write record of a stream is in use
 * (taxi/stream.h); retry once a write has completed.  TAXI_EAGAIN from the
 * same call means something else: the bytes queued are above the stream's
 * high watermark. */
#define TAXI_ENOBUFS (-23)

/* Name resolution (taxi/resolve.h): the name does not exist (the name
 * server said so: not worth asking again soon). */
#define TAXI_ENONAME (-24)
/* Name resolution: a temporary failure (no answer from a name server, its
 * failure): the same question may succeed later. */
#define TAXI_ETRYAGAIN (-25)
/* Name resolution: the name exists but has no address of the family
 * asked for (an IPv6 address of a name that has only IPv4 ones). */
#define TAXI_ENOADDR (-26)

/* TLS (taxi/tls.h): the handshake or the protocol failed (a peer that
 * speaks no TLS or too old a version, a malformed or refused message, a
 * renegotiation asked for); taxi_tls_error_text() says what the engine
 * saw. */
#define TAXI_ETLS (-27)
/* TLS: the peer ended the connection without its close_notify alert, so
 * what was read may have been cut short by a third party: not the end of
 * the stream. */
#define TAXI_ETRUNCATED (-28)
/* TLS: the peer's certificate was not accepted (signed by no trusted
 * authority, expired, or issued for another name); taxi_tls_error_text()
 * says why. */
#define TAXI_EBADCERT (-29)

/* The most negative code: every code lies in [TAXI_ERROR_MIN, 0]. */
#define TAXI_ERROR_MIN (-29)

/*
 * What a dispatcher (reactor, pool, proactor) tells its error callback.
 *
 * A transient failure (fatal == 0) is one the dispatcher handles itself: a
 * wait or a re-arm that failed with TAXI_EAGAIN or TAXI_ENOMEM (the OS
 * short of memory or buffers), or an accept that found no descriptor left
 * (TAXI_ETOOMANY); the step is retried after a bounded, growing pause and
 * the failure is counted.  A persistent failure (fatal == 1) stopped the
 * dispatcher: the same code is returned by its join/wait/shutdown.
 */
typedef struct taxi_error_report {
  int code;             /* TAXI_E* */
  int os_error;         /* errno (GetLastError() on Windows), or 0 */
  const char *where;    /* the step that failed, a static string: "wait",
                           "rearm", "accept", "thread", ... */
  taxi_handle_t handle; /* the handle concerned, or TAXI_INVALID_HANDLE */
  unsigned attempt;     /* consecutive failures of this step so far, from 1 */
  int fatal;            /* 0: handled and retried; 1: the dispatcher stopped */
} taxi_error_report_t;

/*
 * An error callback.  Runs in the thread that met the failure, with no lock
 * of taxi's held; it may call any taxi function except the destroy of the
 * dispatcher reporting.  It should return soon (log, count, stop the
 * dispatcher): the dispatching thread waits for it.  `report` is valid only
 * during the call.
 */
typedef void (*taxi_error_fn)(const taxi_error_report_t *report, void *arg);

/*
 * taxi_strerror - a short English description of a TAXI_E* code.
 * Returns a static string; never NULL.  Unknown codes give "unknown error".
 * Threads: any.
 */
TAXI_EXTERN const char *taxi_strerror(int code);

/*
 * taxi_error_name - the symbolic name of a code, such as "TAXI_EBADF".
 * Returns a static string; never NULL ("TAXI_E?" for unknown codes).
 * Threads: any.
 */
TAXI_EXTERN const char *taxi_error_name(int code);

/*
 * taxi_last_os_error - the operating system error number (errno, or
 * GetLastError()/WSAGetLastError() on Windows) recorded by the most recent
 * taxi call in this thread that failed because of the OS, or 0.
 * Threads: any; the value is per thread.
 */
TAXI_EXTERN int taxi_last_os_error(void);

/*
 * taxi_error_detail - why the most recent refusal in this thread happened:
 * one English sentence that begins with the name of the function that
 * refused and names the argument or options field concerned, for instance
 * "taxi_io_create: options.threads: the reactor dispatcher runs callbacks
 * in one thread; got 2".  Functions record a detail when they refuse a
 * caller's mistake (TAXI_EINVAL, TAXI_EBUSY, TAXI_ENOTSUP and the like);
 * a success does not clear it, and a failure that records none leaves the
 * previous one: read it right after the call that failed, and check that
 * it names that call.  "" when nothing was refused in this thread yet.
 * Returns a string owned by the thread, valid until its next taxi call.
 * Threads: any; the detail is per thread.
 */
TAXI_EXTERN const char *taxi_error_detail(void);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_ERROR_H */
