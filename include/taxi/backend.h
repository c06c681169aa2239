/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/backend.h - which OS mechanisms this build of taxi has.
 *
 * A reactor waits on its handles through one backend: select, poll, epoll,
 * kqueue, ...  Which backends exist depends on the platform and on how taxi
 * was configured; which of those work is decided at run time (an epoll
 * compiled in may be forbidden by a sandbox, for instance).  When a reactor
 * is created without naming a backend, taxi takes the first that works from
 * an ordered table (best first), unless the environment variable TAXI_BACKEND
 * names one; TAXI_BACKEND is ignored in set-user-ID and set-group-ID programs.
 */
#ifndef TAXI_BACKEND_H
#define TAXI_BACKEND_H

#include "platform.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Capability flags.  The core branches on these, never on names.
 */
/* Arm a handle for one event at a time (EPOLLONESHOT, EV_DISPATCH): the
 * kernel deactivates it when it reports it, so no other waiter sees it. */
#define TAXI_CAP_ONESHOT 0x01u
/* Several threads may wait on one handle set at once (a concurrent handle
 * set in the Leader/Followers paper's terms). */
#define TAXI_CAP_MULTI_WAIT 0x02u
/* Edge-triggered notification is available. */
#define TAXI_CAP_EDGE 0x04u
/* Changes to the set take effect in a wait already in progress.  Without
 * this flag (select, poll) the core wakes the waiter after a change. */
#define TAXI_CAP_LIVE_UPDATE 0x08u
/* The backend can watch for exceptional conditions (out-of-band data). */
#define TAXI_CAP_EXCEPT 0x10u

/* What one backend is. */
typedef struct taxi_backend_info {
  const char *name;   /* "epoll", "poll", ...: a static string */
  unsigned caps;      /* TAXI_CAP_* */
  size_t max_handles; /* largest number of handles, 0 when only the OS limits */
  int available;      /* 1 when it works on this machine now, else 0 */
} taxi_backend_info_t;

/*
 * taxi_backend_count - how many readiness backends are compiled in.
 * Threads: any.
 */
TAXI_EXTERN size_t taxi_backend_count(void);

/*
 * taxi_backend_info - describe the compiled-in backend number `index`, in the
 * order automatic selection tries them (best first).  `available` is found by
 * opening and closing an instance, so the call may make system calls.
 *
 * Returns 0, TAXI_EINVAL if info is NULL, TAXI_ENOENT if index >= count.
 * Threads: any.
 */
TAXI_EXTERN int taxi_backend_info(taxi_backend_info_t *info, size_t index);

/*
 * taxi_backend_names - fill `names` with the names of the compiled-in
 * backends that work here, best first, at most `cap` of them.
 *
 * Returns how many work (which may exceed `cap`: call again with more room),
 * or TAXI_EINVAL if names is NULL while cap > 0.
 * Threads: any.
 */
TAXI_EXTERN int taxi_backend_names(const char **names, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_BACKEND_H */
