/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_bound.c - the table of expected replies of taxi/lf_bound.h: the
 * records of the threads that wait, by id, and the hand-off of a reply to
 * exactly the thread awaiting it.
 *
 * The table lives under the pool's lock (core/pools/lf_bound.h), so a record's
 * state, its waiter and the pool's notion of which thread is where change
 * together.  A table stands alone (taxi_lf_bound_t: replies delivered by
 * the application's own code, over any pool, a proactor's too) or inside
 * a multiplexed connection (core/pools/lf_mux.c).
 */
#include "config.h"

#include "taxi/lf_bound.h"
#include "taxi/error.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/pools/lf_bound.h"
#include "core/common/options.h"
#include "core/common/time_math.h"

#include <limits.h>
#include <string.h>

enum { E_IDLE = 0, E_EXPECTED = 1, E_DONE = 2 };

static size_t row_of(const taxi_lf_bound_t *b, uint64_t id) {
  return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & b->mask;
}

static taxi_lf_expect_t **find_locked(taxi_lf_bound_t *b, uint64_t id) {
  taxi_lf_expect_t **at = &b->rows[row_of(b, id)];
  while (*at && (*at)->id != id) at = &(*at)->internal_.next;
  return at;
}

static void unlink_locked(taxi_lf_bound_t *b, taxi_lf_expect_t *e) {
  taxi_lf_expect_t **at = find_locked(b, e->id);
  if (*at == e) *at = e->internal_.next;
  e->internal_.next = NULL;
}

/* e's reply came (or its table ended): done with `result`; its awaiting
 * thread, if any, is woken - that thread alone. */
static void finish_locked(taxi_lf_bound_t *b, taxi_lf_expect_t *e, int result) {
  e->internal_.state = E_DONE;
  e->internal_.result = result;
  taxi__lf_kick_locked(b->pool, e->internal_.waiter);
}

int taxi__bound_init(taxi_lf_bound_t *b, taxi_lf_pool_t *p, unsigned buckets,
                     const char *fn) {
  memset(b, 0, sizeof *b);
  if (buckets > (1u << 24))
    return taxi__refuse(
        TAXI_EINVAL, "%s: options.buckets: at most 2^24; got %u", fn, buckets);
  if (!taxi__lf_source_self(p))
    return taxi__refuse(TAXI_EINVAL, "%s: p: not a pool (destroyed?)", fn);
  size_t rows = 1;
  while (rows < (buckets ? buckets : 256u)) rows <<= 1;
  b->rows = taxi__calloc(rows, sizeof *b->rows);
  if (!b->rows) return TAXI_ENOMEM;
  int rc = taxi__cond_init(&b->change);
  if (rc < 0) {
    taxi__free(b->rows);
    return rc;
  }
  b->mask = rows - 1;
  b->pool = p;
  b->lock = taxi__lf_lock(p);
  return 0;
}

void taxi__bound_fini(taxi_lf_bound_t *b) {
  taxi__cond_destroy(&b->change);
  taxi__free(b->rows);
}

void taxi__bound_fail_locked(taxi_lf_bound_t *b, int code) {
  if (b->error) return;
  b->error = code;
  for (size_t i = 0; i <= b->mask; i++) {
    while (b->rows[i]) {
      taxi_lf_expect_t *e = b->rows[i];
      b->rows[i] = e->internal_.next;
      e->internal_.next = NULL;
      finish_locked(b, e, code);
    }
  }
  taxi__cond_broadcast(&b->change);
}

void taxi__bound_leave_locked(taxi_lf_bound_t *b) {
  b->users--;
  taxi__cond_broadcast(&b->change);
}

int taxi__bound_deliver(taxi_lf_bound_t *b, uint64_t id, const void *body,
                        size_t len) {
  taxi__mutex_lock(b->lock);
  taxi_lf_expect_t **at = find_locked(b, id);
  taxi_lf_expect_t *e = *at;
  if (e) {
    *at = e->internal_.next;
    e->internal_.next = NULL;
    size_t n = len < e->cap ? len : e->cap;
    if (n) memcpy(e->buf, body, n);
    e->length = len;
    finish_locked(b, e, len > e->cap ? TAXI_EMSGSIZE : (int)len);
  }
  taxi__mutex_unlock(b->lock);
  return e ? 0 : TAXI_ENOENT;
}

int taxi__bound_expect(taxi_lf_bound_t *b, taxi_lf_expect_t *e,
                       const char *fn) {
  int rc = 0;
  taxi__mutex_lock(b->lock);
  if (e->internal_.state == E_EXPECTED || e->internal_.waiter) {
    rc = taxi__refuse(TAXI_EBUSY,
                      "%s: e: expecting a reply already (awaited, or not "
                      "yet awaited or forgotten)",
                      fn);
  } else if (b->error) {
    rc = b->error;
  } else {
    taxi_lf_expect_t **at = find_locked(b, e->id);
    if (*at) {
      rc = TAXI_EEXIST;
    } else {
      e->internal_.next = NULL;
      e->internal_.owner = b;
      e->internal_.state = E_EXPECTED;
      e->internal_.result = 0;
      e->length = 0;
      *at = e;
    }
  }
  taxi__mutex_unlock(b->lock);
  return rc;
}

static bool e_done(void *arg) {
  const taxi_lf_expect_t *e = arg;
  return e->internal_.state == E_DONE;
}

int taxi__bound_await(taxi_lf_bound_t *b, taxi_lf_expect_t *e, int timeout_ms,
                      const char *fn) {
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc;
  taxi__mutex_lock(b->lock);
  if (e->internal_.owner != b || e->internal_.state == E_IDLE) {
    rc = TAXI_ENOENT;
  } else if (e->internal_.waiter) {
    rc = taxi__refuse(TAXI_EBUSY, "%s: e: another thread awaits it", fn);
  } else {
    b->users++;
    rc = taxi__lf_participate_locked(b->pool, e_done, e, deadline,
                                     &e->internal_.waiter, fn);
    if (e->internal_.state == E_DONE) {
      rc = e->internal_.result;
      e->internal_.state = E_IDLE;
    } else if (rc != TAXI_EBUSY) {
      /* Timed out, or the pool stopped: no stale entry is left, and a
       * late reply finds nobody expecting it. */
      unlink_locked(b, e);
      e->internal_.state = E_IDLE;
    }
    taxi__bound_leave_locked(b);
  }
  taxi__mutex_unlock(b->lock);
  return rc;
}

int taxi__bound_forget(taxi_lf_bound_t *b, taxi_lf_expect_t *e,
                       const char *fn) {
  int rc = 0;
  taxi__mutex_lock(b->lock);
  if (e->internal_.owner != b || e->internal_.state == E_IDLE) {
    rc = TAXI_ENOENT;
  } else if (e->internal_.waiter) {
    rc = taxi__refuse(TAXI_EBUSY,
                      "%s: e: a thread awaits it; it forgets by itself "
                      "when its await times out",
                      fn);
  } else {
    if (e->internal_.state == E_EXPECTED) unlink_locked(b, e);
    e->internal_.state = E_IDLE;
  }
  taxi__mutex_unlock(b->lock);
  return rc;
}

/* ---- the public calls ---------------------------------------------------- */

int taxi_lf_expect_init(taxi_lf_expect_t *e, uint64_t id, void *buf,
                        size_t cap) {
  if (!e || (!buf && cap) || cap > INT_MAX) return TAXI_EINVAL;
  memset(e, 0, sizeof *e);
  e->id = id;
  e->buf = buf;
  e->cap = cap;
  return 0;
}

void taxi_lf_bound_options_init(taxi_lf_bound_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_lf_bound_create(taxi_lf_bound_t **out, taxi_lf_pool_t *p,
                         const taxi_lf_bound_options_t *opts) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_lf_bound_create: out: NULL");
  *out = NULL;
  if (!p) return taxi__refuse(TAXI_EINVAL, "taxi_lf_bound_create: p: NULL");
  taxi_lf_bound_options_t o;
  taxi_lf_bound_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_lf_bound_create: options",
                         "taxi_lf_bound_options_init") < 0)
    return TAXI_EINVAL;
  taxi_lf_bound_t *b = taxi__malloc(sizeof *b);
  if (!b) return TAXI_ENOMEM;
  int rc = taxi__bound_init(b, p, o.buckets, "taxi_lf_bound_create");
  if (rc < 0) {
    taxi__free(b);
    return rc;
  }
  *out = b;
  return 0;
}

int taxi_lf_bound_expect(taxi_lf_bound_t *b, taxi_lf_expect_t *e) {
  return b && e ? taxi__bound_expect(b, e, "taxi_lf_bound_expect")
                : TAXI_EINVAL;
}

int taxi_lf_bound_deliver(taxi_lf_bound_t *b, uint64_t id, const void *body,
                          size_t len) {
  if (!b || (!body && len)) return TAXI_EINVAL;
  return taxi__bound_deliver(b, id, body, len);
}

int taxi_lf_bound_await(taxi_lf_bound_t *b, taxi_lf_expect_t *e,
                        int timeout_ms) {
  return b && e ? taxi__bound_await(b, e, timeout_ms, "taxi_lf_bound_await")
                : TAXI_EINVAL;
}

int taxi_lf_bound_forget(taxi_lf_bound_t *b, taxi_lf_expect_t *e) {
  return b && e ? taxi__bound_forget(b, e, "taxi_lf_bound_forget")
                : TAXI_EINVAL;
}

int taxi_lf_bound_fail(taxi_lf_bound_t *b, int code) {
  if (!b || code >= 0) return TAXI_EINVAL;
  taxi__mutex_lock(b->lock);
  taxi__bound_fail_locked(b, code);
  taxi__mutex_unlock(b->lock);
  return 0;
}

static bool no_users(const taxi_lf_bound_t *b) { return b->users == 0; }

int taxi_lf_bound_destroy(taxi_lf_bound_t *b) {
  if (!b) return TAXI_EINVAL;
  taxi__mutex_lock(b->lock);
  taxi__bound_fail_locked(b, TAXI_ECANCELED);
  while (!no_users(b)) taxi__cond_wait(&b->change, b->lock);
  taxi__mutex_unlock(b->lock);
  taxi__bound_fini(b);
  taxi__free(b);
  return 0;
}
