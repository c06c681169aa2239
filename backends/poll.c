/*
 * backends/poll.c - the POSIX poll(2) readiness backend.
 *
 * The set lives here, not in the kernel: a packed array of struct pollfd
 * holding the handles that are watched for something, a parallel array of
 * their tokens, and a table indexed by descriptor that says where each
 * registered handle sits (or that it is registered but silent).  Add,
 * modify and del are O(1); del swaps the last entry into the hole.
 *
 * wait runs without the caller's lock, concurrently with add/modify/del,
 * so the set is guarded by a mutex of its own and wait polls a private
 * copy (the snapshot), refreshed only when the set changed since the last
 * wait.  Changes made during a wait take effect at the next one; the core
 * wakes the waiter after each change (no TAXI_CAP_LIVE_UPDATE).  Only one
 * thread waits at a time (no TAXI_CAP_MULTI_WAIT), so the snapshot needs
 * no lock.  Tokens reported are the snapshot's, i.e. those given at add or
 * modify time; one for a handle deleted since is stale, which the core
 * recognises.
 *
 * Quirks handled here, each where it is handled:
 *  - POLLRDHUP is Linux-only (2.6.17) and needs _GNU_SOURCE.
 *  - POLLNVAL for a descriptor closed while registered, and on macOS for
 *    any device (macOS poll(2), BUGS: "poll() ... does not support
 *    devices"): both reported as TAXI_EV_ERR.
 *  - EAGAIN from poll on FreeBSD and macOS (poll(2), ERRORS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POLLRDHUP in glibc's <poll.h> */
#endif
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_POLL

#include "readiness.h"

#include "core/alloc.h"
#include "ports/port.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>

/* Values of poll_state_t.where[fd] other than position + 1. */
#define POLL_UNKNOWN 0u
#define POLL_SILENT UINT32_MAX

#define POLL_MIN_CAP 64u

#ifdef POLLRDHUP
#define POLL_PEER_CLOSED (POLLHUP | POLLRDHUP)
#else
#define POLL_PEER_CLOSED POLLHUP
#endif

/* A pollfd array and the tokens of its entries, index for index. */
typedef struct poll_set {
  struct pollfd *fds;
  uint64_t *tokens;
  size_t count, cap;
} poll_set_t;

typedef struct poll_state {
  taxi__mutex_t lock;

  /* Under `lock`. */
  poll_set_t live; /* the handles watched for something */
  uint32_t *where; /* [where_cap] by descriptor: POLL_* or index + 1 */
  size_t where_cap;
  uint64_t generation; /* bumped by every change to `live` */

  /* The waiting thread's own. */
  poll_set_t snap;
  uint64_t snap_generation;
  size_t resume; /* where the next scan of the results starts */
} poll_state_t;

static short poll_mask(unsigned events) {
  short mask = 0;
  if (events & TAXI_EV_READ) {
    mask |= POLLIN;
#ifdef POLLRDHUP
    mask |= POLLRDHUP;
#endif
  }
  if (events & TAXI_EV_WRITE) mask |= POLLOUT;
  if (events & TAXI_EV_EXCEPT) mask |= POLLPRI;
  return mask;
}

static unsigned poll_events_out(short revents) {
  unsigned ev = 0;
  if (revents & POLLIN) ev |= TAXI_EV_READ;
  if (revents & POLLOUT) ev |= TAXI_EV_WRITE;
  if (revents & POLLPRI) ev |= TAXI_EV_EXCEPT;
  if (revents & POLL_PEER_CLOSED) ev |= TAXI_EV_HUP;
  /* POLLNVAL: the descriptor is not open (closed by the application while
   * still registered), or on macOS a device poll() cannot watch. */
  if (revents & (POLLERR | POLLNVAL)) ev |= TAXI_EV_ERR;
  return ev;
}

/* Give `set` room for `need` entries.  Never shrinks. */
static int poll_set_reserve(poll_set_t *set, size_t need) {
  struct pollfd *fds;
  uint64_t *tokens;
  size_t cap = set->cap ? set->cap : POLL_MIN_CAP;
  size_t unit = sizeof *fds > sizeof *tokens ? sizeof *fds : sizeof *tokens;
  if (need <= set->cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / unit) return TAXI_ENOMEM;
    cap *= 2;
  }
  fds = taxi__realloc(set->fds, cap * sizeof *fds);
  if (!fds) return TAXI_ENOMEM;
  set->fds = fds;
  tokens = taxi__realloc(set->tokens, cap * sizeof *tokens);
  if (!tokens) return TAXI_ENOMEM; /* fds keeps its larger block: harmless */
  set->tokens = tokens;
  set->cap = cap;
  return 0;
}

static void poll_set_free(poll_set_t *set) {
  taxi__free(set->fds);
  taxi__free(set->tokens);
}

/* Make where[fd] addressable; new rows are POLL_UNKNOWN. */
static int poll_where_reserve(poll_state_t *s, taxi_handle_t fd) {
  size_t need = (size_t)fd + 1;
  size_t cap = s->where_cap ? s->where_cap : POLL_MIN_CAP;
  uint32_t *where;
  if (need <= s->where_cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / sizeof *where) return TAXI_ENOMEM;
    cap *= 2;
  }
  where = taxi__realloc(s->where, cap * sizeof *where);
  if (!where) return TAXI_ENOMEM;
  memset(where + s->where_cap, 0, (cap - s->where_cap) * sizeof *where);
  s->where = where;
  s->where_cap = cap;
  return 0;
}

static uint32_t poll_where(const poll_state_t *s, taxi_handle_t fd) {
  return (size_t)fd < s->where_cap ? s->where[fd] : POLL_UNKNOWN;
}

static int poll_append(poll_state_t *s, taxi_handle_t fd, uint64_t token,
                       unsigned events) {
  poll_set_t *live = &s->live;
  size_t i = live->count;
  int rc = poll_set_reserve(live, i + 1);
  if (rc < 0) return rc;
  live->fds[i].fd = fd;
  live->fds[i].events = poll_mask(events);
  live->fds[i].revents = 0;
  live->tokens[i] = token;
  live->count = i + 1;
  s->where[fd] = (uint32_t)(i + 1);
  return 0;
}

/* Remove entry i by moving the last one into its place. */
static void poll_remove_at(poll_state_t *s, size_t i) {
  poll_set_t *live = &s->live;
  size_t last = live->count - 1;
  if (i != last) {
    live->fds[i] = live->fds[last];
    live->tokens[i] = live->tokens[last];
    s->where[live->fds[i].fd] = (uint32_t)(i + 1);
  }
  live->count = last;
}

/* Checks common to add and modify, made before taking the lock.  Only a
 * handle being added (`is_new`) is checked for being open: a known one is
 * re-armed after every event in pool mode, where a system call per event
 * is not wanted, and one closed since shows up in the wait. */
static int poll_check(taxi_handle_t h, unsigned events, bool is_new) {
  if (h < 0) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  /* poll reports a closed descriptor only later, as POLLNVAL; say so now,
   * as the kernel-set backends do. */
  return is_new ? taxi__handle_check(h) : 0;
}

static int poll_open(void **state) {
  poll_state_t *s = taxi__calloc(1, sizeof *s);
  int rc;
  if (!s) return TAXI_ENOMEM;
  rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  s->generation = 1; /* the empty snapshot (generation 0) is out of date */
  *state = s;
  return 0;
}

static void poll_close(void *state) {
  poll_state_t *s = state;
  if (!s) return;
  poll_set_free(&s->live);
  poll_set_free(&s->snap);
  taxi__free(s->where);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
}

static int poll_add(void *state, taxi_handle_t h, uint64_t token,
                    unsigned events, unsigned flags) {
  poll_state_t *s = state;
  int rc = poll_check(h, events, true);
  (void)flags; /* no one-shot arming here (no TAXI_CAP_ONESHOT) */
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  if (poll_where(s, h) != POLL_UNKNOWN) {
    rc = TAXI_EEXIST;
  } else if ((rc = poll_where_reserve(s, h)) == 0) {
    if (events) {
      rc = poll_append(s, h, token, events);
      if (rc == 0) s->generation++;
    } else {
      s->where[h] = POLL_SILENT;
    }
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int poll_modify(void *state, taxi_handle_t h, uint64_t token,
                       unsigned events, unsigned flags) {
  poll_state_t *s = state;
  uint32_t w;
  int rc = poll_check(h, events, false);
  (void)flags;
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  w = poll_where(s, h);
  if (w == POLL_UNKNOWN) {
    rc = TAXI_ENOENT;
  } else if (w == POLL_SILENT) {
    if (events) {
      rc = poll_append(s, h, token, events);
      if (rc == 0) s->generation++;
    }
  } else if (!events) {
    poll_remove_at(s, w - 1);
    s->where[h] = POLL_SILENT;
    s->generation++;
  } else {
    struct pollfd *p = &s->live.fds[w - 1];
    short mask = poll_mask(events);
    /* The core re-arms handles often; an unchanged entry must not cost
     * the waiter a fresh snapshot. */
    if (p->events != mask || s->live.tokens[w - 1] != token) {
      p->events = mask;
      s->live.tokens[w - 1] = token;
      s->generation++;
    }
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int poll_del(void *state, taxi_handle_t h) {
  poll_state_t *s = state;
  uint32_t w;
  int rc = 0;
  if (h < 0) return TAXI_ENOENT;
  /* No handle check: a handle the application closed first is simply
   * forgotten. */
  taxi__mutex_lock(&s->lock);
  w = poll_where(s, h);
  if (w == POLL_UNKNOWN) {
    rc = TAXI_ENOENT;
  } else {
    if (w != POLL_SILENT) {
      poll_remove_at(s, w - 1);
      s->generation++;
    }
    s->where[h] = POLL_UNKNOWN;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* Bring the snapshot up to date.  Allocates only when the set has grown
 * beyond every earlier snapshot. */
static int poll_refresh(poll_state_t *s) {
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  if (s->snap_generation != s->generation) {
    rc = poll_set_reserve(&s->snap, s->live.count);
    if (rc == 0) {
      size_t n = s->live.count;
      if (n) {
        memcpy(s->snap.fds, s->live.fds, n * sizeof *s->snap.fds);
        memcpy(s->snap.tokens, s->live.tokens, n * sizeof *s->snap.tokens);
      }
      s->snap.count = n;
      s->snap_generation = s->generation;
    }
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* Copy up to `max` of the `nready` entries with results into out.  The
 * scan resumes where the last one stopped when `max` cut it short, so
 * handles late in the array are not starved by busy ones before them. */
static int poll_collect(poll_state_t *s, int nready, taxi__ready_t *out,
                        size_t max) {
  size_t n = s->snap.count, i, k = 0;
  int seen = 0;
  if (n == 0) return 0;
  i = s->resume < n ? s->resume : 0;
  for (size_t step = 0; step < n && seen < nready; step++) {
    const struct pollfd *p = &s->snap.fds[i];
    size_t at = i;
    i = i + 1 < n ? i + 1 : 0;
    if (p->revents == 0) continue;
    seen++;
    out[k].token = s->snap.tokens[at];
    out[k].events = poll_events_out(p->revents);
    if (++k == max) {
      s->resume = i;
      break;
    }
  }
  return (int)k;
}

static int poll_wait(void *state, taxi__ready_t *out, size_t max,
                     int timeout_ms) {
  poll_state_t *s = state;
  int n, rc;
  if (!out || max == 0) return TAXI_EINVAL;
  if (max > INT_MAX) max = INT_MAX;
  rc = poll_refresh(s);
  if (rc < 0) return rc;
  if (timeout_ms < 0) timeout_ms = -1;
  n = poll(s->snap.fds, (nfds_t)s->snap.count, timeout_ms);
  if (n < 0) {
    int err = errno;
    /* EAGAIN: FreeBSD and macOS poll(2) report a transient failure to
     * allocate kernel memory so; the next wait tries again. */
    if (err == EINTR || err == EAGAIN) return 0;
    if (err == ENOMEM) {
      taxi__set_os_error(err);
      return TAXI_ENOMEM;
    }
    return taxi__error_from_os(err);
  }
  return poll_collect(s, n, out, max);
}

const taxi__readiness_ops_t taxi__backend_poll = {
    .name = "poll",
    .caps = TAXI_CAP_EXCEPT,
    .max_handles = 0,
    .open = poll_open,
    .close = poll_close,
    .add = poll_add,
    .modify = poll_modify,
    .del = poll_del,
    .wait = poll_wait,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_poll_absent;
#endif /* TAXI_HAVE_POLL */
