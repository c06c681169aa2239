/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/listener.h - listening sockets of the stream layer (taxi/stream.h,
 * which includes this header): each accepted connection is handed to the
 * application as a new stream, with the options the listener was given.
 *
 *     static void on_accept(taxi_listener_t *l, taxi_stream_t *s, void *a) {
 *       taxi_stream_read_start(s, on_read);
 *     }
 *     taxi_listener_create(&l, io, "[::]:8080", NULL, on_accept, NULL);
 *
 * Threads, memory and closing follow taxi/stream.h: a listener's callbacks
 * (accept, posted functions, close) never run in two threads at once, in
 * threads that dispatch its context; it is released after its close
 * callback has returned.
 */
#ifndef TAXI_LISTENER_H
#define TAXI_LISTENER_H

#include "stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- listening ---------------------------------------------------------- */

/* taxi_listener_options_t.flags */
/* Let several sockets share the port, the kernel balancing connections
 * over them (SO_REUSEPORT on Linux, SO_REUSEPORT_LB on FreeBSD); where no
 * option balances, TAXI_ENOTSUP. */
#define TAXI_LISTEN_REUSEPORT 0x1u
/* On an IPv6 address, take IPv6 connections only. */
#define TAXI_LISTEN_V6ONLY 0x2u
/* Do not set SO_REUSEADDR (set by default so a restarted server binds at
 * once). */
#define TAXI_LISTEN_NO_REUSEADDR 0x4u
/* taxi_listener_adopt only: the listener does not close the socket it
 * adopted; it stays the caller's, to close after on_close has run. */
#define TAXI_LISTEN_KEEP_SOCKET 0x8u
/* One listening socket per dispatcher of the context, all bound to the
 * address (with TAXI_LISTEN_REUSEPORT), so that the kernel spreads the
 * connections over them: with TAXI_IO_PROACTORS a socket per proactor,
 * each accepting on that proactor's ring, and the streams it accepts stay
 * on that proactor (rather than being moved as the group's spread says).
 * Where the context has one dispatcher (every other kind: their threads
 * share it), one socket, as with TAXI_LISTEN_REUSEPORT alone.  It is one
 * listener to the application: one accept callback (called from every
 * socket's thread, one call at a time), one pause, one close, one
 * on_close once every socket is closed.  Where no option balances
 * (TAXI_LISTEN_REUSEPORT is TAXI_ENOTSUP there), TAXI_ENOTSUP.
 * taxi_listener_create only. */
#define TAXI_LISTEN_SHARDED 0x10u

/* Options for taxi_listener_create() and taxi_listener_adopt(). */
typedef struct taxi_listener_options {
  size_t size;    /* sizeof(taxi_listener_options_t) */
  int backlog;    /* pending connections the system keeps; <= 0: its max */
  unsigned flags; /* TAXI_LISTEN_* */
  /* Options for the accepted streams (copied); NULL: the defaults. */
  const taxi_stream_options_t *stream;
  /* Called once the listener is closed and no accept callback runs any
   * more; after it the listener is released. */
  void (*on_close)(taxi_listener_t *l, void *arg);
  /* taxi_listener_create only: seconds (1 to 3600) the system may hold a
   * new connection back until its first bytes arrive, so that the accept
   * callback gets a connection with a request to read, and a connection
   * that never sends costs the application nothing (Linux
   * TCP_DEFER_ACCEPT; the kernel counts the wait in retransmissions of
   * its SYN-ACK, so it rounds it up).  0 (the default): hand connections
   * over as they come.  Where the system has no such option (every other
   * system), or on a Unix-domain address, taxi_listener_create returns
   * TAXI_ENOTSUP. */
  int defer_accept;
} taxi_listener_options_t;

/* taxi_listener_options_init - defaults: the system's backlog, SO_REUSEADDR,
 * default stream options.  Nothing for NULL. */
TAXI_EXTERN void taxi_listener_options_init(taxi_listener_options_t *o);

/* TAXI_LISTENER_OPTIONS_INIT - an initialiser with the defaults, as the *_init
 * function sets them. */
TAXI__OPTIONS_DEFAULT(taxi_listener_options_t, taxi_listener_options_init)
#define TAXI_LISTENER_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_listener_options_t, taxi_listener_options_init)

/*
 * taxi_listener_create - listen on `address` (see taxi_addr_parse) and call
 * fn(l, stream, arg) for each connection accepted, with the peer's address
 * available from taxi_stream_peer().  Accept callbacks of one listener run
 * one at a time.  When the process runs out of descriptors, accepting
 * pauses (10 ms, doubling up to 1 s while it lasts) and resumes by
 * itself; other accept failures are counted and retried after a pause of
 * 1 ms doubling up to 256 ms.  Each failure is reported to the context's
 * error callback (not fatal: a listener never gives up).
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL io, out, address or fn;
 * bad options), TAXI_EBADADDR, TAXI_ENOTSUP (TAXI_LISTEN_REUSEPORT,
 * TAXI_LISTEN_SHARDED or defer_accept where the system has no such
 * option), TAXI_EADDRINUSE,
 * TAXI_EPERM,
 * TAXI_ESTOPPED (io is being destroyed), TAXI_ENOMEM, TAXI_ESYS.
 * Ownership: the listener is the context's; taxi_listener_close (or
 * taxi_io_destroy) ends it.
 */
TAXI_EXTERN int taxi_listener_create(taxi_listener_t **out, taxi_io_t *io,
                                     const char *address,
                                     const taxi_listener_options_t *opts,
                                     taxi_accept_fn fn, void *arg);

/*
 * taxi_listener_adopt - accept on `sock`, a stream socket the caller has
 * bound and made listen (one inherited from a service manager, or one the
 * application also accepts on itself), as taxi_listener_create does on
 * its own.  The socket is made non-blocking (every Reactor backend and the
 * emulated Proactor need it): a thread of the caller's that still accepts
 * on it must wait for it (poll) and expect TAXI_EAGAIN-like failures.
 * The kernel keeps one queue of connections for the socket, whoever
 * accepts from it: no connection is lost between the caller's accept()
 * and the listener's, or across taxi_listener_pause().
 * Of opts, flags may hold TAXI_LISTEN_KEEP_SOCKET only (the others are
 * about binding), defer_accept must be 0 (set it on the socket before
 * adopting it), and backlog is ignored (the caller's listen() set it).
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL io, out or fn; bad
 * options; sock is a socket that is not listening), TAXI_EBADF (sock is
 * TAXI_INVALID_HANDLE, not open, or not a socket), TAXI_ESTOPPED,
 * TAXI_ENOMEM, TAXI_ESYS; on failure sock is still the caller's, open.
 * Ownership: the listener is the context's, and so is sock (closed with
 * it) unless TAXI_LISTEN_KEEP_SOCKET.
 */
TAXI_EXTERN int taxi_listener_adopt(taxi_listener_t **out, taxi_io_t *io,
                                    taxi_handle_t sock,
                                    const taxi_listener_options_t *opts,
                                    taxi_accept_fn fn, void *arg);

/*
 * taxi_listener_pause - stop accepting: new connections wait in the
 * system's queue (or go to whoever else accepts on the socket) until
 * taxi_listener_resume().  No accept callback starts after this returns
 * but, where another dispatching thread was handing a connection over at
 * that moment, that one.  Connections the backend had already taken from
 * the queue (io_uring's multishot accept takes several at once, and a
 * cancel reaches the kernel later than this call) are kept open and
 * passed to the callback after the resume, in order, before any new one;
 * taxi_listener_close closes them.  None is dropped.  Pausing a paused
 * listener does nothing.  Any thread may call it, the accept callback
 * included.
 * Returns 0, or TAXI_EINVAL (NULL), TAXI_ENOMEM (the first pause of a
 * Proactor's listener makes room for kept connections): not paused.
 */
TAXI_EXTERN int taxi_listener_pause(taxi_listener_t *l);

/*
 * taxi_listener_resume - accept again after taxi_listener_pause(), the
 * connections kept meanwhile first (in a dispatching thread).  If the
 * listener is also pausing after a failed accept (out of descriptors),
 * it resumes when that pause ends.  Resuming a listener
 * that is not paused does nothing.  Any thread may call it.
 * Returns 0, TAXI_EINVAL (NULL), or an error of the backend re-arming the
 * accept (TAXI_ENOMEM, TAXI_ESYS): then the listener stays paused.
 */
TAXI_EXTERN int taxi_listener_resume(taxi_listener_t *l);

/* taxi_listener_address - the address actually bound (with the port the
 * system chose for port 0).  0, or TAXI_EINVAL. */
TAXI_EXTERN int taxi_listener_address(const taxi_listener_t *l,
                                      taxi_addr_t *out);

/*
 * taxi_listener_close - stop accepting and close the socket (an adopted
 * one with TAXI_LISTEN_KEEP_SOCKET stays open: the caller closes it once
 * on_close has run).  No accept callback starts after this returns; one
 * running in another thread finishes, then on_close runs and the
 * listener is released.  Connections accepted by the system but not yet
 * handed over are closed (those still in its queue stay there while the
 * socket is open).  The listener
 * may be released before this returns: do not use l afterwards (a second
 * close is such a use).  Returns 0, or TAXI_EINVAL (NULL).
 */
TAXI_EXTERN int taxi_listener_close(taxi_listener_t *l);

/* ---- posting to a listener ---------------------------------------------- */

/* A function posted to a listener (taxi_listener_post): status 0, or
 * TAXI_ECANCELED when the listener closed before its turn. */
typedef void (*taxi_listener_post_fn)(taxi_listener_t *l, int status,
                                      void *arg);

/*
 * taxi_listener_post - run fn(l, 0, arg) in the listener's context: in a
 * thread that dispatches the context, never at the same time as an accept
 * callback of l or another function posted to it, never inside this call;
 * in the order posted.  fn runs exactly once: with status 0, or with
 * TAXI_ECANCELED if taxi_listener_close() (or taxi_io_destroy) comes
 * first (then just before on_close).  A dispatching thread that is about
 * to run an accept callback while a posted function runs waits for it:
 * keep posted functions short.  Records as taxi_stream_post.
 *
 * Returns 0, or TAXI_EINVAL (NULL l or fn), TAXI_EBADF (taxi_listener_close
 * was called), TAXI_ESTOPPED (the context is stopping), TAXI_ENOMEM, or an
 * error of the dispatcher scheduling the run; on an error fn does not run.
 * Threads: any, while l has not been closed (see taxi_listener_close).
 */
TAXI_EXTERN int taxi_listener_post(taxi_listener_t *l, taxi_listener_post_fn fn,
                                   void *arg);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_LISTENER_H */
