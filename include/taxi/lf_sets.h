/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/lf_sets.h - Leader/Followers per handle set.
 *
 * Instead of one handle set shared by all threads, several reactors (for
 * instance one per CPU), each dispatched by its own Leader/Followers pool.
 * Waits on different sets run in parallel even on iterative mechanisms
 * (select, poll), and a connection stays with the threads of one set,
 * which keeps its data in one CPU's cache.  This is the "Leader/Followers
 * per handle set" variant of the paper; taxi_lf_create() with
 * TAXI_LEADERS_MANY is the other way to relax the one-leader rule.
 *
 * New connections are spread over the sets either by the kernel (one
 * listening socket per set sharing the port: SO_REUSEPORT on Linux,
 * SO_REUSEPORT_LB on FreeBSD) or by a shared acceptor that registers each
 * accepted connection with the least loaded set (taxi_lf_sets_register).
 * A handler can be moved between sets while running with
 * taxi_reactor_move().
 *
 * Threads.  Every function may be called from any thread and from inside a
 * hook, unless its comment says otherwise.
 */
#ifndef TAXI_LF_SETS_H
#define TAXI_LF_SETS_H

#include "platform.h"
#include "lf.h"
#include "reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_lf_sets taxi_lf_sets_t; /* pools, one per handle set */

/* Options for taxi_lf_sets_create(): start from TAXI_LF_SETS_OPTIONS_INIT
 * or taxi_lf_sets_options_init(), then set what differs. */
typedef struct taxi_lf_sets_options {
  /* sizeof(taxi_lf_sets_options_t) as the program was compiled, set by the
   * initialisers (see taxi_reactor_options_t.size). */
  size_t size;
  unsigned sets; /* handle sets; 0: one per processor online */
  /* Threads spawned per set, each running hooks (threads that join a
   * set's pool with taxi_lf_join come on top); 0: 1. */
  unsigned threads_per_set;
  const char *backend; /* as for taxi_reactor_create(), NULL: best */
  /* The options of every set's pool; NULL: the defaults. */
  const taxi_lf_options_t *pool;
} taxi_lf_sets_options_t;

/* taxi_lf_sets_options_init - the defaults (every field 0 or NULL, size
 * set).  Does nothing for NULL.  Any thread. */
TAXI_EXTERN void taxi_lf_sets_options_init(taxi_lf_sets_options_t *o);

/* TAXI_LF_SETS_OPTIONS_INIT - an initialiser with the defaults. */
TAXI__OPTIONS_DEFAULT(taxi_lf_sets_options_t, taxi_lf_sets_options_init)
#define TAXI_LF_SETS_OPTIONS_INIT \
  TAXI__OPTIONS_INIT(taxi_lf_sets_options_t, taxi_lf_sets_options_init)

/* The most sets. */
#define TAXI_LF_SETS_MAX 256u

/*
 * taxi_lf_sets_create - create the reactors and their pools, and start the
 * threads.  Returns 0 and sets *out, or TAXI_EINVAL (NULL out, sets above
 * TAXI_LF_SETS_MAX, threads above TAXI_LF_MAX_THREADS, bad pool options),
 * or any error of taxi_reactor_create(), taxi_lf_create() (TAXI_ENOTSUP for
 * TAXI_LEADERS_MANY on a backend that cannot) or taxi_lf_spawn().
 */
TAXI_EXTERN int taxi_lf_sets_create(taxi_lf_sets_t **out,
                                    const taxi_lf_sets_options_t *opts);

/*
 * taxi_lf_sets_destroy - shut every pool down, destroy the pools and the
 * reactors (their handlers' close hooks run), free everything.
 * Returns 0, TAXI_EINVAL (NULL), TAXI_EBUSY (from a hook of one of them).
 * Threads: any thread that is not in one of the pools.
 */
TAXI_EXTERN int taxi_lf_sets_destroy(taxi_lf_sets_t *s);

/* taxi_lf_sets_stop - stop every pool (taxi_lf_stop(): each returns when
 * its threads have left).  Returns 0, TAXI_EINVAL, TAXI_ESTOPPED
 * (already), or the first failure that had stopped a pool by itself.
 * Threads: any; from a hook of one of the pools as taxi_lf_stop() says;
 * not a signal handler, which stops each set's reactor instead
 * (taxi_reactor_stop on taxi_lf_sets_reactor(s, i): each pool then stops
 * with its reactor; taxi_lf_sets_wait tells when all have). */
TAXI_EXTERN int taxi_lf_sets_stop(taxi_lf_sets_t *s);

/* taxi_lf_sets_wait - wait until every pool has stopped (by
 * taxi_lf_sets_stop() or by a persistent failure of its own) and its
 * threads have left; at most timeout_ms in all (-1: no limit).  Returns
 * TAXI_ESTOPPED (every pool shut down), the first failure that stopped a
 * pool, TAXI_ETIMEDOUT, TAXI_EINVAL (NULL), TAXI_EBUSY (from a thread of
 * one of the pools).
 * Threads: any thread not in one of the pools. */
TAXI_EXTERN int taxi_lf_sets_wait(taxi_lf_sets_t *s, int timeout_ms);

/* taxi_lf_sets_count - how many sets (0 for NULL). */
TAXI_EXTERN unsigned taxi_lf_sets_count(const taxi_lf_sets_t *s);

/* taxi_lf_sets_reactor, _pool - the reactor and pool of set i, or NULL if
 * i is out of range.  They belong to s: do not destroy them. */
TAXI_EXTERN taxi_reactor_t *taxi_lf_sets_reactor(const taxi_lf_sets_t *s,
                                                 unsigned i);
/* taxi_lf_sets_pool - see taxi_lf_sets_reactor. */
TAXI_EXTERN taxi_lf_pool_t *taxi_lf_sets_pool(const taxi_lf_sets_t *s,
                                              unsigned i);

/* taxi_lf_sets_index - which set reactor r is, or -1. */
TAXI_EXTERN int taxi_lf_sets_index(const taxi_lf_sets_t *s,
                                   const taxi_reactor_t *r);

/*
 * taxi_lf_sets_register - register handle and h, as taxi_reactor_register()
 * does, with the set that has the fewest handles (ties: the next in turn).
 * This is how a shared acceptor balances connections.
 * Returns the index of the set (>= 0) or a taxi_reactor_register() error.
 */
TAXI_EXTERN int taxi_lf_sets_register(taxi_lf_sets_t *s, taxi_handle_t handle,
                                      taxi_handler_t *h, unsigned events);

/* How new connections reach the sets (taxi_lf_sets_listen). */
#define TAXI_BALANCE_AUTO 0     /* KERNEL where it balances, else ACCEPTOR */
#define TAXI_BALANCE_KERNEL 1   /* a listener per set sharing the port */
#define TAXI_BALANCE_ACCEPTOR 2 /* one listener; its acceptor spreads */

/*
 * Makes the acceptor for a listening handle of set `set`.  The acceptor is
 * registered for TAXI_EV_READ on that set's reactor.  Its input hook
 * accepts connections and registers them: with its own set's reactor under
 * TAXI_BALANCE_KERNEL, with taxi_lf_sets_register() under
 * TAXI_BALANCE_ACCEPTOR.  It owns the listener: close it in its close hook.
 * Return NULL to give up (taxi_lf_sets_listen then fails with TAXI_EINVAL).
 */
typedef taxi_handler_t *(*taxi_lf_sets_acceptor_fn)(unsigned set,
                                                    taxi_handle_t listener,
                                                    void *arg);

/*
 * taxi_lf_sets_listen - listen for TCP connections on host:port and spread
 * them over the sets as `balance` says.  host is a numeric IPv4 or IPv6
 * address ("127.0.0.1", "::1"; names are not resolved), or NULL for every
 * address: IPv6's wildcard, which takes IPv4 connections too (and is
 * IPv4's on a system without IPv6), as "*:port" is for
 * taxi_listener_create().  port 0: a free port, reported in *bound_port
 * if not NULL.  The sockets are made as taxi_listener_create() makes its
 * own (SO_REUSEADDR, the system's largest backlog, IPv6 sockets not
 * v6-only).
 * Returns the balance used (TAXI_BALANCE_KERNEL or _ACCEPTOR), or
 * TAXI_EINVAL (NULL s or make, unknown balance, port above 65535, a NULL
 * acceptor), TAXI_EBADADDR (host not a numeric address), TAXI_ENOTSUP
 * (TAXI_BALANCE_KERNEL where the kernel does not balance),
 * TAXI_EADDRINUSE, TAXI_EPERM, TAXI_ESYS.  On failure no listener is left.
 */
TAXI_EXTERN int taxi_lf_sets_listen(taxi_lf_sets_t *s, const char *host,
                                    unsigned port, int balance,
                                    taxi_lf_sets_acceptor_fn make, void *arg,
                                    unsigned *bound_port);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_LF_SETS_H */
