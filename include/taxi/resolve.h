/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/resolve.h - host names into addresses, off the dispatching threads:
 * an I/O context (taxi/io.h) asks a small pool of resolver threads of its
 * own, and the answer comes back to a callback in a thread that
 * dispatches the context, as every stream callback does.  No dispatching
 * thread - a Leader/Followers pool's leader above all - ever waits for a
 * name server.  taxi_stream_connect uses it for "host:port".
 *
 *     static void on_addrs(taxi_resolve_t *r, int status,
 *                          const taxi_addr_t *addrs, size_t n, void *arg) {
 *       // status 0: addrs[0 .. n), in the order to try them
 *     }
 *     taxi_resolve_t *r;
 *     taxi_resolve(&r, io, "example.com:443", NULL, on_addrs, NULL);
 *
 * The resolver threads (options.resolve_threads of the context, 2 by
 * default) start at the first name asked for and run getaddrinfo, or the
 * context's own resolver (options.resolve_hook), one name each at a time;
 * names wait for a free thread in a queue of bounded length
 * (options.resolve_queue).  A numeric address ("127.0.0.1:80",
 * "[::1]:80") is answered without a thread.
 *
 * Threads.  Every function may be called from any thread, callbacks of the
 * context included.
 *
 * Errors.  0 on success, a negative TAXI_E* code on failure; the codes of
 * a failed resolution are TAXI_ENONAME (no such name), TAXI_ETRYAGAIN (a
 * temporary failure: no answer from a name server), TAXI_ENOADDR (no
 * address of the family asked for), TAXI_ETIMEDOUT, TAXI_ECANCELED.
 */
#ifndef TAXI_RESOLVE_H
#define TAXI_RESOLVE_H

#include "platform.h"
#include "addr.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_io taxi_io_t;           /* an I/O context (taxi/io.h) */
typedef struct taxi_resolve taxi_resolve_t; /* a resolution in progress */

/* The most addresses one resolution delivers (the first ones, in order). */
#define TAXI_RESOLVE_MAX 16
/* The longest host name taken, in bytes (a DNS name is at most 253). */
#define TAXI_RESOLVE_NAME_MAX 253

/*
 * A resolution is over: status 0 and addrs[0 .. n) (n >= 1, IPv4 and IPv6
 * addresses with the port asked for), or a failure (addrs NULL, n 0):
 * TAXI_ENONAME, TAXI_ETRYAGAIN, TAXI_ENOADDR, TAXI_ETIMEDOUT (the timeout
 * of the options passed), TAXI_ECANCELED (taxi_resolve_cancel, or
 * taxi_io_destroy), TAXI_ENOMEM, TAXI_ESYS, or what the context's
 * resolve_hook returned.  The addresses are in the order to try them:
 * with family 0, the resolver's order (RFC 6724's, for getaddrinfo) with
 * the families interleaved, IPv6 first (RFC 8305, section 4).  They are
 * valid during the call only.
 *
 * Runs once per taxi_resolve, in a thread that dispatches the context,
 * serialised with the functions posted to it (taxi_io_post), never inside
 * taxi_resolve; TAXI_ECANCELED at taxi_io_destroy runs during it, as the
 * context's posts do.  r is freed when this returns.
 */
typedef void (*taxi_resolve_fn)(taxi_resolve_t *r, int status,
                                const taxi_addr_t *addrs, size_t n, void *arg);

/*
 * A resolver of the application's, in place of getaddrinfo
 * (taxi_io_options_t.resolve_hook): store the addresses of `host` (never
 * a numeric address: those are answered without it) into out[0 .. max)
 * and return how many, or fail with a negative TAXI_E* code (TAXI_ENONAME,
 * TAXI_ETRYAGAIN, TAXI_ENOADDR, ...; 0 counts as TAXI_ENOADDR).  `port`
 * is the port asked for, in decimal, and family 0 (any), TAXI_ADDR_IPV4
 * or TAXI_ADDR_IPV6.  Addresses may be made with taxi_addr_parse
 * ("[::1]:0"): a port left 0 is set to the one asked for afterwards
 * (another one is kept: a hook may send a name elsewhere), and those of
 * another family than asked, or neither IPv4 nor IPv6, are dropped.
 *
 * Runs in a resolver thread of the context, which dispatches nothing: it
 * may block (for as long as it likes: a resolution that times out or is
 * cancelled meanwhile is told so, and the late answer is dropped), and up
 * to resolve_threads calls run at once.  It may still be running after
 * taxi_io_destroy returned (nothing can interrupt it): what arg points to
 * must outlive it.  It must not call the context's functions.
 */
typedef int (*taxi_resolve_hook_fn)(const char *host, const char *port,
                                    int family, taxi_addr_t *out, size_t max,
                                    void *arg);

/*
 * Options for taxi_resolve().  Initialise with taxi_resolve_options_init()
 * (or TAXI_RESOLVE_OPTIONS_INIT), then set what differs.
 */
typedef struct taxi_resolve_options {
  size_t size; /* sizeof(taxi_resolve_options_t), set by the initialisers */
  /* The family wanted: 0 any (the default), TAXI_ADDR_IPV4, TAXI_ADDR_IPV6;
   * a name with none of it fails with TAXI_ENOADDR. */
  int family;
  /* Fail with TAXI_ETIMEDOUT if no answer came within this many
   * nanoseconds (0, the default: no limit but the resolver's own). */
  taxi_time_t timeout;
} taxi_resolve_options_t;

/* taxi_resolve_options_init - the defaults: any family, no timeout.  Does
 * nothing for NULL. */
TAXI_EXTERN void taxi_resolve_options_init(taxi_resolve_options_t *o);

/* TAXI_RESOLVE_OPTIONS_INIT - an initialiser with the defaults, as the
 * *_init function sets them. */
TAXI__OPTIONS_DEFAULT(taxi_resolve_options_t, taxi_resolve_options_init)
#define TAXI_RESOLVE_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_resolve_options_t, taxi_resolve_options_init)

/*
 * taxi_resolve - find the addresses of host_port ("example.com:443",
 * "[::1]:80", "127.0.0.1:80") in the background, with the options (NULL:
 * the defaults), and call fn(r, status, addrs, n, arg) once with them (see
 * taxi_resolve_fn).  A name is handed to a resolver thread of the context
 * (started at the first name, up to options.resolve_threads); a numeric
 * address is answered at once, through the same callback.
 *
 * Returns 0 and sets *out (which may be NULL when the caller never
 * cancels), or TAXI_EINVAL (NULL io, host_port or fn; bad options: size,
 * family, timeout), TAXI_EBADADDR (no port, a port that is not a number
 * or above 65535, an empty host, a host longer than TAXI_RESOLVE_NAME_MAX
 * bytes or with a character no host name has, an IPv6 address without
 * brackets, a Unix-domain address), TAXI_ENOBUFS (options.resolve_queue
 * names are waiting already), TAXI_ESTOPPED (taxi_io_stop was called, or
 * taxi_io_destroy began), TAXI_ENOMEM, TAXI_ESYS (no resolver thread
 * could be started); then fn does not run.  A refusal's detail
 * (taxi_error_detail) says which.
 *
 * Ownership: r is the context's, freed when fn returns.  Threads: any.
 */
TAXI_EXTERN int taxi_resolve(taxi_resolve_t **out, taxi_io_t *io,
                             const char *host_port,
                             const taxi_resolve_options_t *opts,
                             taxi_resolve_fn fn, void *arg);

/*
 * taxi_resolve_cancel - give r up: its callback runs with TAXI_ECANCELED
 * (soon, in a dispatching thread) whatever the resolver answers, unless it
 * has begun to run already.  A resolver thread busy with r finishes its
 * call and drops the answer.  Returns 0 (also when r was cancelled
 * already), TAXI_EINVAL (NULL), or TAXI_EBUSY (too late: the callback of
 * r is running).
 *
 * Threads: any, as long as the callback of r has not returned (r is freed
 * then): from the callbacks of the context serialised with it (functions
 * posted with taxi_io_post), or from a thread that knows it has not run.
 */
TAXI_EXTERN int taxi_resolve_cancel(taxi_resolve_t *r);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_RESOLVE_H */
