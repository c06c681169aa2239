/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/apr.h - using taxi from a program written with the Apache Portable
 * Runtime (APR): register APR sockets and files, tie the life of a taxi
 * object to an apr_pool_t, and convert error codes both ways.
 *
 * Installed only when taxi was built with APR (configure found apr-1), and
 * then libtaxi also has the "apr" readiness backends (taxi/backend.h).
 * Compile with APR's flags as well as taxi's:
 *
 *     cc app.c $(pkg-config --cflags --libs taxi apr-1)
 *
 * APR itself: the application calls apr_initialize() once, before it
 * starts threads, as APR asks, and apr_terminate() at the end.  The
 * functions here assume APR is initialised.  (The "apr" backends call
 * apr_initialize()/apr_terminate() themselves around each instance, under
 * a lock of their own, so a reactor on them works without the application
 * knowing about APR; APR counts those calls.)
 *
 * APR pools are not thread-safe: the binding functions below touch the
 * apr_pool_t they are given (a cleanup and a user-data entry), so call them
 * from the thread that owns that pool, as every APR function that takes a
 * pool must be.  The taxi objects themselves stay callable from any thread.
 */
#ifndef TAXI_APR_H
#define TAXI_APR_H

#include "taxi.h"

#include <apr_errno.h>
#include <apr_file_io.h>
#include <apr_network_io.h>
#include <apr_pools.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- APR sockets and files as taxi handles ---------------------------- */

/*
 * taxi_apr_socket_handle - the native handle under an APR socket.
 * Returns 0 and sets *out, TAXI_EINVAL (out or sock NULL), TAXI_EBADF (the
 * socket has no OS handle: it was closed, or never opened).
 * Threads: any.  Ownership: the socket keeps its handle; taxi borrows it.
 */
TAXI_EXTERN int taxi_apr_socket_handle(taxi_handle_t *out, apr_socket_t *sock);

/*
 * taxi_apr_file_handle - the native handle under an APR file (a pipe, a
 * device; regular files are always "ready" to the handle-set backends).
 * Returns 0 and sets *out, TAXI_EINVAL (NULL), TAXI_EBADF (no OS handle).
 * Threads: any.
 */
TAXI_EXTERN int taxi_apr_file_handle(taxi_handle_t *out, apr_file_t *file);

/*
 * taxi_apr_register_socket - taxi_reactor_register() for an APR socket:
 * dispatch `events` on its handle to handler h.  The hooks receive the
 * native handle; keep the apr_socket_t where the handler can reach it
 * (embed both in one struct) and read with apr_socket_recv().  Give the
 * socket a timeout of 0 first (apr_socket_timeout_set(sock, 0)) so that a
 * hook never blocks in APR.
 *
 * Returns what taxi_reactor_register() returns, and TAXI_EINVAL for a NULL
 * socket, TAXI_EBADF for a socket without an OS handle (nothing is
 * registered then).
 * Threads: any.  Ownership: the socket stays the application's and must
 * stay open until the handler's close hook has run; taxi never closes it.
 * Close it (apr_socket_close(), or by destroying its pool) in the close
 * hook or after taxi_reactor_remove() has returned.
 */
TAXI_EXTERN int taxi_apr_register_socket(taxi_reactor_t *r, apr_socket_t *sock,
                                         taxi_handler_t *h, unsigned events);

/*
 * taxi_apr_register_file - the same for an APR file (pipe, device).
 * Returns as taxi_apr_register_socket().  Threads: any.
 */
TAXI_EXTERN int taxi_apr_register_file(taxi_reactor_t *r, apr_file_t *file,
                                       taxi_handler_t *h, unsigned events);

/* ---- lifetime tied to an apr_pool_t ----------------------------------- */

/*
 * taxi_apr_reactor_bind - destroy reactor r when `pool` is cleared or
 * destroyed: a cleanup registered on the pool calls taxi_reactor_destroy()
 * (every handler's close hook runs then, in that thread).
 *
 * The cleanup is a pre-cleanup (apr_pool_pre_cleanup_register()): it runs
 * before APR destroys the pool's subpools and runs its other cleanups, so
 * APR sockets the handlers use, in this pool or in subpools of it, are
 * still open when the close hooks run.  APR runs them in the reverse order
 * of registration, so bind the reactor first and the thread pool or
 * proactor that uses it after: the pool of threads then stops before its
 * reactor goes.  The cleanup runs once; clearing the pool again does
 * nothing more.
 *
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EEXIST (r is bound to this pool
 * already), TAXI_ENOMEM.
 * Threads: the pool's owner (see above).  Ownership: from now on the pool
 * decides when r is destroyed.  To destroy r yourself, unbind it first:
 * destroying a bound reactor and then the pool would destroy it twice.
 * Clear or destroy the pool from a thread that is not dispatching r.
 */
TAXI_EXTERN int taxi_apr_reactor_bind(taxi_reactor_t *r, apr_pool_t *pool);

/*
 * taxi_apr_reactor_unbind - undo taxi_apr_reactor_bind(): the reactor is
 * the caller's again and the pool no longer destroys it.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_ENOENT (not bound to this pool,
 * including after the pool was cleared, which destroyed r).
 * Threads: the pool's owner.
 */
TAXI_EXTERN int taxi_apr_reactor_unbind(taxi_reactor_t *r, apr_pool_t *pool);

/*
 * taxi_apr_lf_bind - shut down and destroy Leader/Followers pool p when
 * `pool` is cleared or destroyed: the cleanup calls taxi_lf_destroy(),
 * which wakes every thread of p, lets each finish the event it processes,
 * joins the threads p spawned and frees p; threads lent with
 * taxi_lf_join() return 0 from it.  This is how an APR program stops a
 * running pool of threads: by destroying the apr_pool_t it belongs to.
 *
 * Clear or destroy the pool from a thread outside p.  From one of p's own
 * hooks taxi_lf_destroy() cannot wait for itself: the cleanup then only
 * shuts p down (the other threads leave) and p is not freed.
 *
 * Returns 0, TAXI_EINVAL (NULL, or p is not a live pool), TAXI_EEXIST,
 * TAXI_ENOMEM.  Threads: the pool's owner.  Ownership: as for the reactor;
 * a destroyed L/F pool is known as such, so a bound pool destroyed by
 * hand is not destroyed twice, but unbind it all the same.
 */
TAXI_EXTERN int taxi_apr_lf_bind(taxi_lf_pool_t *p, apr_pool_t *pool);
/* taxi_apr_lf_unbind - as taxi_apr_reactor_unbind(), for an L/F pool. */
TAXI_EXTERN int taxi_apr_lf_unbind(taxi_lf_pool_t *p, apr_pool_t *pool);

/*
 * taxi_apr_hsha_bind - the same for a half-sync/half-async pool: the
 * cleanup calls taxi_hsha_destroy().  Returns and threads as
 * taxi_apr_lf_bind().
 */
TAXI_EXTERN int taxi_apr_hsha_bind(taxi_hsha_pool_t *p, apr_pool_t *pool);
/* taxi_apr_hsha_unbind - as taxi_apr_reactor_unbind(), for that pool. */
TAXI_EXTERN int taxi_apr_hsha_unbind(taxi_hsha_pool_t *p, apr_pool_t *pool);

/*
 * taxi_apr_proactor_bind - the same for a proactor: the cleanup calls
 * taxi_proactor_destroy(), which completes every operation still in flight
 * with TAXI_ECANCELED (their handlers run in the clearing thread).  Bind an
 * L/F pool over the proactor after the proactor, so it stops first.
 * Returns and threads as taxi_apr_reactor_bind().
 */
TAXI_EXTERN int taxi_apr_proactor_bind(taxi_proactor_t *p, apr_pool_t *pool);
/* taxi_apr_proactor_unbind - as taxi_apr_reactor_unbind(). */
TAXI_EXTERN int taxi_apr_proactor_unbind(taxi_proactor_t *p, apr_pool_t *pool);

/* ---- error codes ------------------------------------------------------ */

/*
 * taxi_apr_status - a TAXI_E* code (or 0) as an apr_status_t, for an APR
 * function that must return one.  Each code has its own status, so that
 * taxi_apr_error() gives the code back, except TAXI_ENOBACKEND (becomes
 * APR_ENOTIMPL, read back as TAXI_ENOTSUP) and TAXI_ESYS (becomes the OS
 * error taxi_last_os_error() holds in this thread, or APR_EGENERAL).  A
 * value that is no TAXI_E* code gives APR_EGENERAL.
 * Threads: any.
 */
TAXI_EXTERN apr_status_t taxi_apr_status(int taxi_code);

/*
 * taxi_apr_error - an apr_status_t as a TAXI_E* code: APR_SUCCESS is 0,
 * the APR codes with a taxi counterpart map to it (APR_EINVAL, APR_ENOMEM,
 * APR_EBADF, APR_EEXIST, APR_ENOENT, APR_ENOTIMPL -> TAXI_ENOTSUP,
 * APR_TIMEUP, APR_EBUSY, APR_EAGAIN, APR_EOF -> TAXI_EEOF, APR_EBADIP ->
 * TAXI_EBADADDR, connection errors, ...), and anything else is TAXI_ESYS.
 * Threads: any.
 */
TAXI_EXTERN int taxi_apr_error(apr_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_APR_H */
