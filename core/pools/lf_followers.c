/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_followers.c - the Leader/Followers pool's followers: the
 * queue they wait in and the order they are promoted in (LIFO, FIFO,
 * priority; or one shared condition where the OS picks,
 * TAXI_PROMOTE_SHARED), and a follower's wait.
 *
 * Each follower waits on a condition variable of its own, so that a
 * promotion wakes exactly the thread the order chose.  Calls: ports and
 * common only; the loop (lf_pool.c) calls this file.
 */
#include "config.h"

#include "core/pools/lf_impl.h"

/* Higher priority first; among equals the latest to arrive (LIFO). */
static bool ahead_of(const taxi__lf_thread_t *a, const taxi__lf_thread_t *b) {
  return a->priority >= b->priority;
}

static void follow_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t) {
  t->promoted = false;
  t->following = true;
  p->followers++;
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) return;
  taxi__lf_thread_t *at = NULL; /* insert before this one; NULL: at the tail */
  switch (p->opts.promotion) {
    case TAXI_PROMOTE_LIFO:
      at = p->head;
      break;
    case TAXI_PROMOTE_FIFO:
      at = NULL;
      break;
    case TAXI_PROMOTE_PRIORITY:
      for (at = p->head; at && !ahead_of(t, at); at = at->next) {
      }
      break;
    case TAXI_PROMOTE_SHARED:
      break;
  }
  t->next = at;
  t->prev = at ? at->prev : p->tail;
  if (t->prev)
    t->prev->next = t;
  else
    p->head = t;
  if (at)
    at->prev = t;
  else
    p->tail = t;
}

void taxi__lf_unfollow_locked(taxi_lf_pool_t *p, taxi__lf_thread_t *t) {
  if (!t->following) return;
  t->following = false;
  p->followers--;
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) return;
  if (t->prev)
    t->prev->next = t->next;
  else
    p->head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    p->tail = t->prev;
  t->prev = t->next = NULL;
}

/* Wake one follower to lead (or to take pending work). */
void taxi__lf_promote_locked(taxi_lf_pool_t *p) {
  if (p->opts.promotion == TAXI_PROMOTE_SHARED) {
    if (p->shared_tokens >= p->followers) return;
    p->shared_tokens++;
    p->stats.promotions++;
    taxi__cond_signal(&p->shared);
    return;
  }
  taxi__lf_thread_t *t = p->head;
  if (!t) return;
  taxi__lf_unfollow_locked(p, t);
  t->promoted = true;
  p->stats.promotions++;
  taxi__cond_signal(&t->cond);
}

/* Follow until promoted, told to leave, or `deadline`.  Returns
 * TAXI_ETIMEDOUT when the deadline passed first. */
int taxi__lf_follow(taxi_lf_pool_t *p, taxi__lf_thread_t *t,
                    taxi_time_t deadline) {
  taxi_time_t since = taxi_now();
  int rc = 0;
  follow_locked(p, t);
  for (;;) {
    if (p->shutdown || (t->leave && !t->until) || t->kicked) break;
    if (p->opts.promotion == TAXI_PROMOTE_SHARED) {
      if (p->shared_tokens) {
        p->shared_tokens--;
        break;
      }
    } else if (t->promoted) {
      break;
    }
    taxi__cond_t *c =
        p->opts.promotion == TAXI_PROMOTE_SHARED ? &p->shared : &t->cond;
    if (deadline == INT64_MAX) {
      taxi__cond_wait(c, p->src.lock);
    } else if (taxi__cond_timedwait(c, p->src.lock, deadline) ==
               TAXI_ETIMEDOUT) {
      /* A promotion that raced with the timeout is still honoured. */
      if (p->opts.promotion == TAXI_PROMOTE_SHARED ? p->shared_tokens == 0
                                                   : !t->promoted) {
        rc = TAXI_ETIMEDOUT;
        break;
      }
    }
  }
  taxi__lf_unfollow_locked(p, t);
  taxi__lf_account(&p->stats.follower_ns, &t->stats.follower_ns, since,
                   taxi_now());
  return rc;
}
