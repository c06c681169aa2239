/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi.h - the whole public API of taxi, a portable event-dispatching
 * library.  Including it includes every header below but taxi/apr.h; each
 * header documents its part in full.
 *
 * The Reactor (taxi/reactor.h, taxi/handler.h, taxi/backend.h): one thread
 * waits on a set of handles with the native handle-set mechanism (select,
 * poll, epoll, kqueue, WSAPoll) and calls each handle's handler when it is
 * ready, beside timers, cross-thread notifications and POSIX signals.
 *
 * The thread pools over a reactor: Leader/Followers (taxi/lf.h), one
 * thread waiting while the others follow, with one pool per handle set
 * (taxi/lf_sets.h) and replies bound to the thread that asked
 * (taxi/lf_bound.h); half-sync/half-async (taxi/hsha.h), one thread
 * waiting and queueing the ready handles for workers.
 *
 * The Proactor (taxi/proactor.h): asynchronous operations (accept,
 * connect, read, write, files, timers) whose completion handlers run in
 * the thread or the Leader/Followers pool that dispatches the completions,
 * over io_uring, IOCP, POSIX aio or an emulation over a reactor.  Proactor
 * groups (taxi/proactor_group.h): one proactor per thread, each handle in
 * one of them.
 *
 * The stream layer: an I/O context (taxi/io.h) picks the dispatcher at run
 * time (a reactor, either pool, a proactor, a proactor group), and byte
 * streams, listeners and timers (taxi/stream.h) are written once against
 * it and run under each; host names are resolved off the dispatching
 * threads (taxi/resolve.h); UDP datagram endpoints (taxi/dgram.h) run on
 * the reactor and its pools.
 *
 * Message queues (taxi/mqueue.h): bounded queues of the application's own
 * items that a reactor or pool dispatches beside its handles.
 *
 * APR (taxi/apr.h, not included here): APR sockets and files in a
 * reactor, taxi objects tied to an apr_pool_t, error codes converted both
 * ways; installed when taxi was built with APR, compiled with its flags.
 *
 * Errors (taxi/error.h), allocation hooks (taxi/alloc.h), the clock and the
 * handle type (taxi/platform.h) and the version (taxi/version.h) serve all
 * of them.
 */
#ifndef TAXI_H
#define TAXI_H

#include "platform.h"
#include "error.h"
#include "alloc.h"
#include "backend.h"
#include "handler.h"
#include "reactor.h"
#include "lf.h"
#include "lf_bound.h"
#include "lf_sets.h"
#include "mqueue.h"
#include "hsha.h"
#include "proactor.h"
#include "proactor_group.h"
#include "io.h"
#include "addr.h"
#include "resolve.h"
#include "stream.h"
#include "listener.h"
#include "tls.h"
#include "dgram.h"
#include "version.h"

#endif /* TAXI_H */
