/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_impl.h - the Leader/Followers pool's private state, shared
 * by the files that implement it: lf_followers.c (the followers' queue and
 * the promotion orders), lf_pool.c (the loop every thread runs, the thread
 * records, taking part for a caller) and lf_control.c (the public calls
 * that make, grow, shrink, stop and destroy a pool).
 *
 * Locking: everything here is guarded by the source's lock (src.lock),
 * except `reg`, which the registry guards.
 */
#ifndef TAXI_CORE_LF_IMPL_H
#define TAXI_CORE_LF_IMPL_H

#include "taxi/lf.h"
#include "core/common/backoff.h"
#include "core/common/registry.h"
#include "core/pools/dispatch_source.h"

#include <stdbool.h>

typedef struct taxi__lf_thread taxi__lf_thread_t;

/* One thread that is or was in the pool.  Records are kept until the pool
 * is destroyed, so their counters stay readable and an application thread
 * that joins again gets its old id. */
struct taxi__lf_thread {
  taxi_lf_pool_t *pool;
  unsigned id;
  bool spawned;
  bool active;             /* in the pool now */
  bool leave;              /* asked to leave by taxi_lf_shrink() */
  bool exited;             /* a spawned thread that has left for good */
  bool joined;             /* ... and was joined by taxi_lf_shrink() */
  taxi__thread_t thread;   /* spawned threads: to join them */
  taxi__thread_id_t owner; /* the OS thread this record belongs to */
  taxi__cond_t cond;       /* its synchronizer as a follower */
  bool promoted;
  bool following; /* in the followers list */
  int priority;
  taxi__lf_thread_t *prev, *next; /* in the followers list */
  void *buf;                      /* where its waits put what they report */
  /* Lent to the events it runs (taxi__batch_scratch, TAXI__SCRATCH_BYTES);
   * `looping` while its loop runs: a callback that awaits runs the loop
   * again, and must not lend the buffer a stream of the outer loop may
   * hold. */
  unsigned char *scratch;
  bool looping;
  /* Taking part for a caller (taxi__lf_participate_locked): the loop
   * returns as soon as until(until_arg) holds. */
  bool (*until)(void *arg);
  void *until_arg;
  bool leading;   /* in a wait on the handle set */
  bool kicked;    /* a hand-off for it arrived: stop following or leading */
  bool reporting; /* in the on_error callback, counted as a leader */
  taxi_lf_thread_stats_t stats;
};

struct taxi_lf_pool {
  taxi__registered_t reg;
  taxi__source_t src; /* what it dispatches: a reactor or a proactor */
  taxi_lf_options_t opts;
  unsigned max_leaders;

  taxi__lf_thread_t **threads; /* every record, by id */
  unsigned nthreads, threads_cap;

  unsigned active, leaders, followers, spawned_active;
  /* Leaders taking part for a caller (an await): with several leaders on
   * one handle set, the wake-up that ends such a thread's wait could be
   * taken by another, so such a thread leads alone (see may_lead). */
  unsigned bound_leaders;
  taxi__lf_thread_t *head, *tail; /* followers, next to promote at head */
  taxi__cond_t shared;            /* TAXI_PROMOTE_SHARED followers wait here */
  unsigned shared_tokens;         /* promotions not yet claimed */
  taxi__cond_t left;              /* broadcast whenever a thread leaves */
  taxi__cond_t pause;             /* a leader pausing after a failed wait */
  bool shutdown;
  int error;               /* the failure that stopped the pool, or 0 */
  taxi__backoff_t backoff; /* consecutive failed waits */
  /* The time a message has been taking (an event, or each callback of a
   * draining event that delivered several), averaged over the runs of
   * events the threads processed (core/pools/lf_pool.c): whether the hooks
   * are quick enough for a thread to keep a few events to itself. */
  uint64_t event_ns;

  taxi_lf_stats_t stats;
};

/* ---- time accounting ----------------------------------------------------- */

static inline void taxi__lf_account(uint64_t *pool_ns, uint64_t *thread_ns,
                                    taxi_time_t since, taxi_time_t now) {
  uint64_t d = now > since ? (uint64_t)(now - since) : 0;
  *pool_ns += d;
  *thread_ns += d;
}

/* Pin p for the duration of a call; false if it is not a live pool. */
static inline bool taxi__lf_pin(taxi_lf_pool_t *p) {
  return p && taxi__registry_pin(&p->reg, TAXI__KIND_LF);
}

/* ---- the followers (core/pools/lf_followers.c) ------------------------- */

/* Out of the followers, if t is one (a promotion or a kick). */
void taxi__lf_unfollow_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t);
/* Wake one follower, chosen by the promotion order, to lead or to take
 * pending work; nothing if none follows. */
void taxi__lf_promote_locked(taxi_lf_pool_t *p);
/* Follow until promoted, told to leave, kicked, or `deadline` (then
 * TAXI_ETIMEDOUT); 0 otherwise.  The lock is released while waiting. */
int taxi__lf_follow(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                    taxi_time_t deadline);

/* ---- the loop and the thread records (core/pools/lf_pool.c) ------------- */

/* Whether the calling thread is an active member of p. */
bool taxi__lf_in_pool(const taxi_lf_pool_t *p);
/* Wake every follower, pausing leader and waiter on the source. */
void taxi__lf_wake_everyone_locked(taxi_lf_pool_t *p);
/* Make every thread leave as soon as it is not processing an event; does
 * not wait for them.  The source's waits return at once from now on. */
void taxi__lf_stop_locked(taxi_lf_pool_t *p);
/* Tell the application's on_error of a failure, the lock released. */
void taxi__lf_report_locked(taxi_lf_pool_t *p, int code, const char *where,
                            unsigned attempt, bool fatal);
/* A new record under the next id (TAXI_ENOMEM), freed only by
 * taxi__lf_record_free when the pool is destroyed. */
int taxi__lf_record_new_locked(taxi_lf_pool_t *p, bool spawned,
                               taxi__lf_thread_t **out);
void taxi__lf_record_free(taxi__lf_thread_t *t);
/* The calling application thread's record: its old one, or a new one. */
int taxi__lf_app_record_locked(taxi_lf_pool_t *p, taxi__lf_thread_t **out);
/* Count t in the pool (spawned threads from their spawn on). */
void taxi__lf_enter_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t);
/* Run in the pool as t (entered already) until it leaves; returns what
 * the loop returned (0, or TAXI_ETIMEDOUT, or the pool's failure). */
int taxi__lf_member_run_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                               int priority, taxi_time_t deadline);
/* A spawned thread's main function; arg is its record. */
void *taxi__lf_spawned_main(void *arg);

#endif /* TAXI_CORE_LF_IMPL_H */
