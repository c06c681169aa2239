/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/select.c - the POSIX select(2) readiness backend.
 *
 * The set is three fd_sets (read, write, except) plus a fourth that marks
 * every registered descriptor, silent ones included, and a token array
 * indexed by descriptor.  Add, modify and del are O(1): `high` is only an
 * upper bound on the highest watched descriptor, lowered lazily when the
 * waiter takes its snapshot.  Descriptors at or above FD_SETSIZE cannot be
 * represented: add refuses them with TAXI_ETOOMANY before any FD_* macro
 * sees them (glibc with _FORTIFY_SOURCE and the macOS SDK abort on such
 * descriptors; elsewhere they would write past the set).
 *
 * wait runs without the caller's lock, concurrently with add/modify/del:
 * the set is guarded by a mutex of its own, and wait works on a private
 * copy refreshed only when the set changed since the last wait.  Changes
 * made during a wait take effect at the next one; the core wakes the
 * waiter after each change (no TAXI_CAP_LIVE_UPDATE).  Only one thread
 * waits at a time (no TAXI_CAP_MULTI_WAIT).  Tokens reported are the
 * snapshot's, as given at add or modify time.
 *
 * select reports neither hang-ups nor errors as such: a peer that closed
 * makes the descriptor readable, a pending socket error makes it readable
 * and writable.  The one error it does report, EBADF for the whole call,
 * is turned into reports of the descriptors found closed (TAXI_EV_ERR
 * with TAXI__EV_CLOSED, see select_report_closed()).  This file is
 * written to POSIX select(2); Winsock's select, whose fd_set is a list of
 * SOCKETs, is not covered.
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1 /* glibc hides POSIX under -std=c11 without it */
#endif
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_SELECT

#include "readiness.h"

#include "core/common/alloc.h"
#include "ports/port.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>

typedef struct select_state {
  taxi__mutex_t lock;

  /* Under `lock`. */
  fd_set rd, wr, ex;   /* what each descriptor is watched for */
  fd_set known;        /* registered, whether watched for anything or not */
  int high;            /* no descriptor above it is watched; -1 when empty */
  uint64_t generation; /* bumped by every change to rd, wr, ex or tokens */
  uint64_t tokens[FD_SETSIZE];

  /* The waiting thread's own. */
  fd_set snap_rd, snap_wr, snap_ex;
  int snap_high;
  uint64_t snap_generation;
  int resume; /* where the next scan of the results starts */
  uint64_t snap_tokens[FD_SETSIZE];
} select_state_t;

static int select_watched(const fd_set *rd, const fd_set *wr, const fd_set *ex,
                          int fd) {
  return FD_ISSET(fd, rd) || FD_ISSET(fd, wr) || FD_ISSET(fd, ex);
}

static unsigned select_events_at(const fd_set *rd, const fd_set *wr,
                                 const fd_set *ex, int fd) {
  unsigned ev = 0;
  if (FD_ISSET(fd, rd)) ev |= TAXI_EV_READ;
  if (FD_ISSET(fd, wr)) ev |= TAXI_EV_WRITE;
  if (FD_ISSET(fd, ex)) ev |= TAXI_EV_EXCEPT;
  return ev;
}

/* Set fd's bits in the live sets to `events`.  Returns whether they
 * changed. */
static int select_set_events(select_state_t *s, int fd, unsigned events) {
  unsigned old = select_events_at(&s->rd, &s->wr, &s->ex, fd);
  if (old == events) return 0;
  FD_CLR(fd, &s->rd);
  FD_CLR(fd, &s->wr);
  FD_CLR(fd, &s->ex);
  if (events & TAXI_EV_READ) FD_SET(fd, &s->rd);
  if (events & TAXI_EV_WRITE) FD_SET(fd, &s->wr);
  if (events & TAXI_EV_EXCEPT) FD_SET(fd, &s->ex);
  if (events && fd > s->high) s->high = fd;
  return 1;
}

/* Record fd's interest and token; the caller holds the lock. */
static void select_store(select_state_t *s, int fd, uint64_t token,
                         unsigned events) {
  int changed = select_set_events(s, fd, events);
  if (events && s->tokens[fd] != token) {
    s->tokens[fd] = token;
    changed = 1;
  }
  if (changed) s->generation++;
}

/* Checks common to add and modify, made before taking the lock.  Only a
 * handle being added (`is_new`) is checked for being open: a known one is
 * re-armed after every event in pool mode, where a system call per event
 * is not wanted, and one closed since shows up in the wait.  Nor is one
 * the library has just accepted or made (TAXI__ARM_OPEN). */
static int select_check(taxi_handle_t h, unsigned events, bool is_new) {
  if (h < 0) return TAXI_EBADF;
  if (h >= FD_SETSIZE) return TAXI_ETOOMANY;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  /* select reports a closed descriptor only later, by failing as a whole;
   * say so now, as the kernel-set backends do. */
  return is_new ? taxi__handle_check(h) : 0;
}

static int select_open(void **state) {
  select_state_t *s = taxi__calloc(1, sizeof *s);
  int rc;
  if (!s) return TAXI_ENOMEM;
  rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  FD_ZERO(&s->rd);
  FD_ZERO(&s->wr);
  FD_ZERO(&s->ex);
  FD_ZERO(&s->known);
  FD_ZERO(&s->snap_rd);
  FD_ZERO(&s->snap_wr);
  FD_ZERO(&s->snap_ex);
  s->high = -1;
  s->snap_high = -1;
  s->generation = 1; /* the empty snapshot (generation 0) is out of date */
  *state = s;
  return 0;
}

static void select_close(void *state) {
  select_state_t *s = state;
  if (!s) return;
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
}

static int select_add(void *state, taxi_handle_t h, uint64_t token,
                      unsigned events, unsigned flags) {
  select_state_t *s = state;
  /* No one-shot arming here (no TAXI_CAP_ONESHOT); a handle the library
   * has just made is open. */
  int rc = select_check(h, events, !(flags & TAXI__ARM_OPEN));
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  if (FD_ISSET(h, &s->known)) {
    rc = TAXI_EEXIST;
  } else {
    FD_SET(h, &s->known);
    select_store(s, h, token, events);
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int select_modify(void *state, taxi_handle_t h, uint64_t token,
                         unsigned events, unsigned flags) {
  select_state_t *s = state;
  int rc = select_check(h, events, false);
  (void)flags;
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  if (!FD_ISSET(h, &s->known))
    rc = TAXI_ENOENT;
  else
    select_store(s, h, token, events);
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int select_del(void *state, taxi_handle_t h) {
  select_state_t *s = state;
  int rc = 0;
  if (h < 0 || h >= FD_SETSIZE) return TAXI_ENOENT;
  /* No handle check: a handle the application closed first is simply
   * forgotten. */
  taxi__mutex_lock(&s->lock);
  if (!FD_ISSET(h, &s->known)) {
    rc = TAXI_ENOENT;
  } else {
    FD_CLR(h, &s->known);
    if (select_set_events(s, h, 0)) s->generation++;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* Bring the snapshot up to date, lowering `high` past descriptors no
 * longer watched on the way. */
static void select_refresh(select_state_t *s) {
  taxi__mutex_lock(&s->lock);
  if (s->snap_generation != s->generation) {
    while (s->high >= 0 && !select_watched(&s->rd, &s->wr, &s->ex, s->high))
      s->high--;
    s->snap_rd = s->rd;
    s->snap_wr = s->wr;
    s->snap_ex = s->ex;
    s->snap_high = s->high;
    if (s->high >= 0)
      memcpy(s->snap_tokens, s->tokens,
             ((size_t)s->high + 1) * sizeof s->tokens[0]);
    s->snap_generation = s->generation;
  }
  taxi__mutex_unlock(&s->lock);
}

/* select failed with EBADF: some watched descriptor was closed by the
 * application before it was deleted.  Report those closed, as poll
 * reports POLLNVAL, so the core can remove their handlers; until then
 * each wait fails the same way.  None found means the culprit was deleted
 * (and the number perhaps reused) meanwhile: the next wait has a fresh
 * snapshot. */
static int select_report_closed(select_state_t *s, taxi__ready_t *out,
                                size_t max) {
  size_t k = 0;
  for (int fd = 0; fd <= s->snap_high && k < max; fd++) {
    if (!select_watched(&s->snap_rd, &s->snap_wr, &s->snap_ex, fd)) continue;
    if (taxi__handle_check(fd) == 0) continue;
    out[k].token = s->snap_tokens[fd];
    out[k].events = TAXI_EV_ERR | TAXI__EV_CLOSED;
    k++;
  }
  return (int)k;
}

/* Copy up to `max` descriptors with results into out; `nbits` is select's
 * count of set bits.  The scan resumes where the last one stopped when
 * `max` cut it short, so high descriptors are not starved by busy low
 * ones. */
static int select_collect(select_state_t *s, const fd_set *rd, const fd_set *wr,
                          const fd_set *ex, int nbits, taxi__ready_t *out,
                          size_t max) {
  int n = s->snap_high + 1, fd, seen = 0;
  size_t k = 0;
  if (n <= 0) return 0;
  fd = s->resume < n ? s->resume : 0;
  for (int step = 0; step < n && seen < nbits; step++) {
    int at = fd;
    unsigned ev = select_events_at(rd, wr, ex, at);
    fd = fd + 1 < n ? fd + 1 : 0;
    if (!ev) continue;
    seen += ((ev & TAXI_EV_READ) != 0) + ((ev & TAXI_EV_WRITE) != 0) +
            ((ev & TAXI_EV_EXCEPT) != 0);
    out[k].token = s->snap_tokens[at];
    out[k].events = ev;
    if (++k == max) {
      s->resume = fd;
      break;
    }
  }
  return (int)k;
}

static int select_wait(void *state, taxi__ready_t *out, size_t max,
                       int timeout_ms) {
  select_state_t *s = state;
  fd_set rd, wr, ex;
  struct timeval tv, *tvp = NULL;
  int n;
  if (!out || max == 0) return TAXI_EINVAL;
  if (max > INT_MAX) max = INT_MAX;
  select_refresh(s);
  /* select overwrites its sets, so it gets a copy of the snapshot. */
  rd = s->snap_rd;
  wr = s->snap_wr;
  ex = s->snap_ex;
  if (timeout_ms >= 0) {
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    tvp = &tv;
  }
  n = select(s->snap_high + 1, &rd, &wr, &ex, tvp);
  if (n < 0) {
    int err = errno;
    /* EAGAIN: macOS select(2) reports a transient failure to allocate
     * kernel memory so; the next wait tries again. */
    if (err == EINTR || err == EAGAIN) return 0;
    if (err == EBADF) return select_report_closed(s, out, max);
    if (err == ENOMEM) {
      taxi__set_os_error(err);
      return TAXI_ENOMEM;
    }
    return taxi__error_from_os(err);
  }
  return select_collect(s, &rd, &wr, &ex, n, out, max);
}

const taxi__readiness_ops_t taxi__backend_select = {
    .name = "select",
    .caps = TAXI_CAP_EXCEPT,
    .max_handles = FD_SETSIZE,
    .open = select_open,
    .close = select_close,
    .add = select_add,
    .modify = select_modify,
    .del = select_del,
    .wait = select_wait,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_select_absent;
#endif /* TAXI_HAVE_SELECT */
