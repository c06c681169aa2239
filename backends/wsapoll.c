/*
 * backends/wsapoll.c - the readiness backend over WSAPoll (Windows Vista
 * and later), Winsock's poll().
 *
 * The set is kept as in backends/poll.c: a packed WSAPOLLFD array of the
 * sockets watched for something, their tokens index for index, and a
 * handle map from socket to position (or "registered but silent"), since
 * SOCKETs are arbitrary values that cannot index a table.  Add, modify and
 * del are O(1) on average; del swaps the last entry into the hole.  wait
 * polls a snapshot refreshed only when the set changed, so it can run
 * without the caller's lock while add/modify/del go on (changes take
 * effect at the next wait; the core wakes the waiter after each).  One
 * thread waits at a time.
 *
 * WSAPoll quirks handled here:
 *  - POLLPRI in `events` makes the whole call fail with WSAEINVAL (the
 *    Microsoft provider does not support it), so out-of-band data cannot
 *    be watched: no TAXI_CAP_EXCEPT, and TAXI_EV_EXCEPT is TAXI_ENOTSUP.
 *  - An empty array fails (WSAEINVAL) instead of sleeping: sleep instead.
 *  - Only sockets can be polled: other handles are TAXI_ENOTSUP at add.
 *  - Windows releases before 10 version 2004 never report a failed
 *    non-blocking connect() (no POLLHUP/POLLERR; the socket stays
 *    silent).  Nothing can be done about that here; the select backend
 *    reports it, so applications that need it there should use select.
 *  - POLLNVAL for a socket closed while registered: TAXI_EV_ERR.
 *  - A peer's orderly close is POLLHUP without POLLRDNORM (on Windows and
 *    under wine alike): reported as TAXI_EV_READ | TAXI_EV_HUP to a socket
 *    watched for reading, as POSIX poll reports it.
 */
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_WSAPOLL

#include "readiness.h"

#include "core/alloc.h"
#include "core/handle_map.h"
#include "ports/win32/win32_impl.h"

#include <limits.h>
#include <string.h>

/* handle map values other than position + 1 */
#define WP_SILENT UINT32_MAX

#define WP_MIN_CAP 64u

typedef struct wp_set {
  WSAPOLLFD *fds;
  uint64_t *tokens;
  size_t count, cap;
} wp_set_t;

typedef struct wp_state {
  taxi__mutex_t lock;

  /* Under `lock`. */
  wp_set_t live;
  taxi__handle_map_t where; /* socket -> WP_SILENT or position + 1 */
  uint64_t generation;

  /* The waiting thread's own. */
  wp_set_t snap;
  uint64_t snap_generation;
  size_t resume; /* where the next scan of the results starts */
} wp_state_t;

static SHORT wp_mask(unsigned events) {
  SHORT mask = 0;
  if (events & TAXI_EV_READ) mask |= POLLRDNORM;
  if (events & TAXI_EV_WRITE) mask |= POLLWRNORM;
  return mask;
}

static unsigned wp_events_out(SHORT events, SHORT revents) {
  unsigned ev = 0;
  if (revents & (POLLRDNORM | POLLRDBAND)) ev |= TAXI_EV_READ;
  /* A peer's orderly close comes as POLLHUP alone (POSIX poll adds
   * POLLIN): a reader must still be told, and its read then returns 0. */
  if ((revents & POLLHUP) && (events & POLLRDNORM)) ev |= TAXI_EV_READ;
  if (revents & POLLWRNORM) ev |= TAXI_EV_WRITE;
  if (revents & POLLHUP) ev |= TAXI_EV_HUP;
  if (revents & (POLLERR | POLLNVAL)) ev |= TAXI_EV_ERR;
  return ev;
}

static int wp_set_reserve(wp_set_t *set, size_t need) {
  WSAPOLLFD *fds;
  uint64_t *tokens;
  size_t cap = set->cap ? set->cap : WP_MIN_CAP;
  if (need <= set->cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / sizeof *fds) return TAXI_ENOMEM;
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

static void wp_set_free(wp_set_t *set) {
  taxi__free(set->fds);
  taxi__free(set->tokens);
}

/* Point the map entry of `sock` at `value` (present or not). */
static int wp_where_set(wp_state_t *s, SOCKET sock, uint32_t value) {
  (void)taxi__handle_map_del(&s->where, (taxi_handle_t)sock);
  return taxi__handle_map_put(&s->where, (taxi_handle_t)sock, value);
}

static int wp_append(wp_state_t *s, SOCKET sock, uint64_t token,
                     unsigned events) {
  wp_set_t *live = &s->live;
  size_t i = live->count;
  int rc = wp_set_reserve(live, i + 1);
  if (rc < 0) return rc;
  rc = wp_where_set(s, sock, (uint32_t)(i + 1));
  if (rc < 0) return rc;
  live->fds[i].fd = sock;
  live->fds[i].events = wp_mask(events);
  live->fds[i].revents = 0;
  live->tokens[i] = token;
  live->count = i + 1;
  return 0;
}

/* Remove entry i by moving the last one into its place.  The map update
 * replaces a present key's value, which needs no memory. */
static void wp_remove_at(wp_state_t *s, size_t i) {
  wp_set_t *live = &s->live;
  size_t last = live->count - 1;
  if (i != last) {
    live->fds[i] = live->fds[last];
    live->tokens[i] = live->tokens[last];
    (void)wp_where_set(s, live->fds[i].fd, (uint32_t)(i + 1));
  }
  live->count = last;
}

static int wp_check(taxi_handle_t h, unsigned events) {
  if (h == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  if (events & TAXI_EV_EXCEPT) return TAXI_ENOTSUP;
  return 0;
}

static int wp_open(void **state) {
  int rc = taxi__winsock_init();
  if (rc < 0) return rc;
  wp_state_t *s = taxi__calloc(1, sizeof *s);
  if (!s) return TAXI_ENOMEM;
  rc = taxi__mutex_init(&s->lock);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  taxi__handle_map_init(&s->where);
  s->generation = 1;
  *state = s;
  return 0;
}

static void wp_close(void *state) {
  wp_state_t *s = state;
  if (!s) return;
  wp_set_free(&s->live);
  wp_set_free(&s->snap);
  taxi__handle_map_destroy(&s->where);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
}

static int wp_add(void *state, taxi_handle_t h, uint64_t token, unsigned events,
                  unsigned flags) {
  wp_state_t *s = state;
  uint32_t w;
  int rc = wp_check(h, events);
  (void)flags; /* no one-shot arming (no TAXI_CAP_ONESHOT) */
  if (rc < 0) return rc;
  rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  if (!taxi__is_socket(h)) return TAXI_ENOTSUP;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &w) == 0) {
    rc = TAXI_EEXIST;
  } else if (events) {
    rc = wp_append(s, (SOCKET)h, token, events);
    if (rc == 0) s->generation++;
  } else {
    rc = taxi__handle_map_put(&s->where, h, WP_SILENT);
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int wp_modify(void *state, taxi_handle_t h, uint64_t token,
                     unsigned events, unsigned flags) {
  wp_state_t *s = state;
  uint32_t w;
  int rc = wp_check(h, events);
  (void)flags;
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &w) < 0) {
    rc = TAXI_ENOENT;
  } else if (w == WP_SILENT) {
    if (events) {
      rc = wp_append(s, (SOCKET)h, token, events);
      if (rc == 0) s->generation++;
    }
  } else if (!events) {
    wp_remove_at(s, w - 1);
    (void)wp_where_set(s, (SOCKET)h, WP_SILENT);
    s->generation++;
  } else {
    WSAPOLLFD *p = &s->live.fds[w - 1];
    SHORT mask = wp_mask(events);
    if (p->events != mask || s->live.tokens[w - 1] != token) {
      p->events = mask;
      s->live.tokens[w - 1] = token;
      s->generation++;
    }
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int wp_del(void *state, taxi_handle_t h) {
  wp_state_t *s = state;
  uint32_t w;
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  if (taxi__handle_map_get(&s->where, h, &w) < 0) {
    rc = TAXI_ENOENT;
  } else {
    if (w != WP_SILENT) {
      wp_remove_at(s, w - 1);
      s->generation++;
    }
    (void)taxi__handle_map_del(&s->where, h);
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int wp_refresh(wp_state_t *s) {
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  if (s->snap_generation != s->generation) {
    rc = wp_set_reserve(&s->snap, s->live.count);
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

static int wp_collect(wp_state_t *s, int nready, taxi__ready_t *out,
                      size_t max) {
  size_t n = s->snap.count, i, k = 0;
  int seen = 0;
  if (n == 0) return 0;
  i = s->resume < n ? s->resume : 0;
  for (size_t step = 0; step < n && seen < nready; step++) {
    const WSAPOLLFD *p = &s->snap.fds[i];
    size_t at = i;
    i = i + 1 < n ? i + 1 : 0;
    if (p->revents == 0) continue;
    seen++;
    out[k].token = s->snap.tokens[at];
    out[k].events = wp_events_out(p->events, p->revents);
    if (++k == max) {
      s->resume = i;
      break;
    }
  }
  return (int)k;
}

static int wp_wait(void *state, taxi__ready_t *out, size_t max,
                   int timeout_ms) {
  wp_state_t *s = state;
  int n, rc;
  if (!out || max == 0) return TAXI_EINVAL;
  if (max > INT_MAX) max = INT_MAX;
  rc = wp_refresh(s);
  if (rc < 0) return rc;
  if (s->snap.count == 0) {
    /* See select_win32.c: an empty set cannot be waited on. */
    Sleep(timeout_ms < 0 ? 50 : (DWORD)timeout_ms);
    return 0;
  }
  if (timeout_ms < 0) timeout_ms = -1;
  n = WSAPoll(s->snap.fds, (ULONG)s->snap.count, timeout_ms);
  if (n == SOCKET_ERROR) {
    int err = WSAGetLastError();
    if (err == WSAEINTR) return 0;
    return taxi__error_from_os(err);
  }
  return wp_collect(s, n, out, max);
}

const taxi__readiness_ops_t taxi__backend_wsapoll = {
    .name = "wsapoll",
    .caps = 0,
    .max_handles = 0,
    .open = wp_open,
    .close = wp_close,
    .add = wp_add,
    .modify = wp_modify,
    .del = wp_del,
    .wait = wp_wait,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_wsapoll_absent;
#endif /* TAXI_HAVE_WSAPOLL */
