/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/select_win32.c - the readiness backend over Winsock select().
 *
 * Winsock's fd_set is not a bitmap but a counted array of SOCKETs, and
 * SOCKETs are arbitrary handle values, so this is a separate file from
 * the POSIX select.c (whose sets are indexed by descriptor).  It also
 * registers under the name "select".
 *
 * The set: a packed array of {socket, token, events} with a handle map
 * from socket to position (del swaps the last entry into the hole).  The
 * limit is FD_SETSIZE, raised below before winsock2.h is included (its
 * default is 64); add refuses more with TAXI_ETOOMANY, and a handle that
 * is not a socket with TAXI_ENOTSUP (Winsock select watches sockets only).
 *
 * wait runs without the caller's lock, concurrently with add/modify/del:
 * the set has a mutex of its own and wait works on a snapshot refreshed
 * only when the set changed since the last wait; changes made during a
 * wait take effect at the next one (the core wakes the waiter after each
 * change).  One thread waits at a time.
 *
 * Winsock quirks handled here:
 *  - select() with three empty sets fails (WSAEINVAL) instead of sleeping:
 *    an empty set sleeps instead.
 *  - A non-blocking connect() that fails is reported in exceptfds, not in
 *    writefds.  Every socket watched for writing is therefore put into the
 *    except set too; found there, it is reported as TAXI_EV_ERR (and as
 *    TAXI_EV_EXCEPT only if that was asked for).
 *  - A socket closed while registered fails the whole call (WSAENOTSOCK):
 *    those found closed are reported as TAXI_EV_ERR with TAXI__EV_CLOSED,
 *    as poll's POLLNVAL.
 *  - The result sets list the ready sockets; looking each up in a sorted
 *    index keeps collection O(n log n) instead of FD_ISSET's scan per
 *    socket.
 */
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_SELECT && defined(_WIN32)

/* Before any header that may include winsock2.h. */
#define FD_SETSIZE 1024

#include "readiness.h"

#include "core/common/alloc.h"
#include "core/common/handle_map.h"
#include "ports/win32/win32_impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct sel_entry {
  SOCKET sock;
  uint64_t token;
  unsigned events; /* 0: registered but silent */
} sel_entry_t;

typedef struct sel_sorted {
  SOCKET sock;
  uint32_t at;
} sel_sorted_t;

typedef struct sel_state {
  taxi__mutex_t lock;

  /* Under `lock`. */
  sel_entry_t live[FD_SETSIZE];
  size_t count;
  taxi__handle_map_t where; /* socket -> position in live */
  uint64_t generation;

  /* The waiting thread's own. */
  sel_entry_t snap[FD_SETSIZE];
  size_t snap_count;
  /* The snapshot's sockets sorted, with their positions in snap: the
   * lookup from a result set back to the entry.  A sorted array rather
   * than a map, so that a refresh (after every re-arm in pool mode)
   * allocates nothing. */
  sel_sorted_t sorted[FD_SETSIZE];
  uint64_t snap_generation;
  unsigned got[FD_SETSIZE]; /* events found per snapshot entry */
  size_t resume;            /* where the next scan of the results starts */
  fd_set rd, wr, ex;
} sel_state_t;

static int sel_check(taxi_handle_t h, unsigned events) {
  if (h == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  return 0;
}

static int sel_open(void **state) {
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  sel_state_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  taxi__handle_map_init(&s->where);
  s->generation = 1; /* the empty snapshot (generation 0) is out of date */
  *state = s;
  return 0;
}

static void sel_close(void *state) {
  sel_state_t *s = state;
  if (!s) return;
  taxi__handle_map_destroy(&s->where);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
}

static int sel_add(void *state, taxi_handle_t h, uint64_t token,
                   unsigned events, unsigned flags) {
  sel_state_t *s = state;
  uint32_t at;
  int rc = sel_check(h, events);
  (void)flags; /* no one-shot arming (no TAXI_CAP_ONESHOT) */
  if (rc < 0) return rc;
  rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  if (!taxi__is_socket(h)) return TAXI_ENOTSUP;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &at) == 0) {
    rc = TAXI_EEXIST;
  } else if (s->count >= FD_SETSIZE) {
    rc = TAXI_ETOOMANY;
  } else if ((rc = taxi__handle_map_put(&s->where, h, (uint32_t)s->count)) ==
             0) {
    s->live[s->count].sock = (SOCKET)h;
    s->live[s->count].token = token;
    s->live[s->count].events = events;
    s->count++;
    s->generation++;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int sel_modify(void *state, taxi_handle_t h, uint64_t token,
                      unsigned events, unsigned flags) {
  sel_state_t *s = state;
  uint32_t at;
  int rc = sel_check(h, events);
  (void)flags;
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &at) < 0) {
    rc = TAXI_ENOENT;
  } else if (s->live[at].events != events || s->live[at].token != token) {
    /* The core re-arms often; an unchanged entry costs no new snapshot. */
    s->live[at].events = events;
    s->live[at].token = token;
    s->generation++;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int sel_del(void *state, taxi_handle_t h) {
  sel_state_t *s = state;
  uint32_t at;
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &at) < 0) {
    rc = TAXI_ENOENT;
  } else {
    size_t last = s->count - 1;
    (void)taxi__handle_map_del(&s->where, h);
    if (at != last) {
      s->live[at] = s->live[last];
      /* Cannot fail: the key is present, only its value changes. */
      (void)taxi__handle_map_del(&s->where, (taxi_handle_t)s->live[at].sock);
      (void)taxi__handle_map_put(&s->where, (taxi_handle_t)s->live[at].sock,
                                 at);
    }
    s->count = last;
    s->generation++;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int sel_sorted_cmp(const void *a, const void *b) {
  SOCKET x = ((const sel_sorted_t *)a)->sock;
  SOCKET y = ((const sel_sorted_t *)b)->sock;
  return x < y ? -1 : x > y;
}

/* Bring the snapshot (and its sorted index) up to date. */
static void sel_refresh(sel_state_t *s) {
  bool changed = false;
  taxi__mutex_lock(&s->lock);
  if (s->snap_generation != s->generation) {
    changed = true;
    size_t k = 0;
    for (size_t i = 0; i < s->count; i++) {
      if (!s->live[i].events) continue;
      s->snap[k] = s->live[i];
      s->sorted[k].sock = s->live[i].sock;
      s->sorted[k].at = (uint32_t)k;
      k++;
    }
    s->snap_count = k;
    s->snap_generation = s->generation;
  }
  taxi__mutex_unlock(&s->lock);
  /* The index is the waiter's own: sorted outside the lock. */
  if (changed)
    qsort(s->sorted, s->snap_count, sizeof s->sorted[0], sel_sorted_cmp);
}

/* The call failed because a watched socket was closed behind our back. */
static int sel_report_closed(sel_state_t *s, taxi__ready_t *out, size_t max) {
  size_t k = 0;
  for (size_t i = 0; i < s->snap_count && k < max; i++) {
    if (taxi__is_socket((taxi_handle_t)s->snap[i].sock)) continue;
    out[k].token = s->snap[i].token;
    out[k].events = TAXI_EV_ERR | TAXI__EV_CLOSED;
    k++;
  }
  return (int)k;
}

static void sel_mark(sel_state_t *s, const fd_set *set, unsigned bit) {
  for (u_int i = 0; i < set->fd_count; i++) {
    sel_sorted_t key = {set->fd_array[i], 0};
    const sel_sorted_t *hit = bsearch(&key, s->sorted, s->snap_count,
                                      sizeof s->sorted[0], sel_sorted_cmp);
    if (hit) s->got[hit->at] |= bit;
  }
}

static int sel_wait(void *state, taxi__ready_t *out, size_t max,
                    int timeout_ms) {
  sel_state_t *s = state;
  struct timeval tv, *tvp = NULL;
  size_t k = 0;
  int n;

  if (!out || max == 0) return TAXI_EINVAL;
  sel_refresh(s);
  if (s->snap_count == 0) {
    /* Nothing to watch: Winsock would fail.  An endless wait on an empty
     * set cannot end anyway (the core always watches its wake-up socket,
     * so this is an empty backend used directly); bound it. */
    Sleep(timeout_ms < 0 ? 50 : (DWORD)timeout_ms);
    return 0;
  }
  FD_ZERO(&s->rd);
  FD_ZERO(&s->wr);
  FD_ZERO(&s->ex);
  /* Direct appends: FD_SET searches the array for duplicates first, and
   * the snapshot has none. */
  for (size_t i = 0; i < s->snap_count; i++) {
    unsigned ev = s->snap[i].events;
    SOCKET sock = s->snap[i].sock;
    if (ev & TAXI_EV_READ) s->rd.fd_array[s->rd.fd_count++] = sock;
    if (ev & TAXI_EV_WRITE) s->wr.fd_array[s->wr.fd_count++] = sock;
    if (ev & (TAXI_EV_EXCEPT | TAXI_EV_WRITE))
      s->ex.fd_array[s->ex.fd_count++] = sock;
    s->got[i] = 0;
  }
  if (timeout_ms >= 0) {
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    tvp = &tv;
  }
  n = select(0, &s->rd, &s->wr, &s->ex, tvp);
  if (n == SOCKET_ERROR) {
    int err = WSAGetLastError();
    if (err == WSAEINTR) return 0;
    if (err == WSAENOTSOCK) return sel_report_closed(s, out, max);
    return taxi__error_from_os(err);
  }
  if (n == 0) return 0;
  sel_mark(s, &s->rd, TAXI_EV_READ);
  sel_mark(s, &s->wr, TAXI_EV_WRITE);
  sel_mark(s, &s->ex, TAXI_EV_EXCEPT);
  /* The scan resumes where the last one stopped when `max` cut it short,
   * so that sockets late in the set are not starved by busy ones before
   * them; those left are reported again by the next wait, as they stay
   * ready (level-triggered). */
  size_t i = s->resume < s->snap_count ? s->resume : 0;
  for (size_t step = 0; step < s->snap_count; step++) {
    size_t at = i;
    unsigned got = s->got[at], ev = 0;
    i = i + 1 < s->snap_count ? i + 1 : 0;
    if (!got) continue;
    ev = got & (TAXI_EV_READ | TAXI_EV_WRITE);
    if (got & TAXI_EV_EXCEPT) {
      /* Out-of-band data if asked for; otherwise (watched for writing
       * only) a connect that failed. */
      if (s->snap[at].events & TAXI_EV_EXCEPT)
        ev |= TAXI_EV_EXCEPT;
      else
        ev |= TAXI_EV_ERR;
    }
    out[k].token = s->snap[at].token;
    out[k].events = ev;
    if (++k == max) {
      s->resume = i;
      break;
    }
  }
  return (int)k;
}

const taxi__readiness_ops_t taxi__backend_select = {
    .name = "select",
    .caps = TAXI_CAP_EXCEPT,
    .max_handles = FD_SETSIZE,
    .open = sel_open,
    .close = sel_close,
    .add = sel_add,
    .modify = sel_modify,
    .del = sel_del,
    .wait = sel_wait,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_select_win32_absent;
#endif /* TAXI_HAVE_SELECT && _WIN32 */
