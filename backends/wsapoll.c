/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/wsapoll.c - the readiness backend over WSAPoll (Windows Vista
 * and later), Winsock's poll().
 *
 * The set is kept as in backends/poll.c, in the same table
 * (backends/pollfd_table.h) of WSAPOLLFD entries and their tokens, with a
 * handle map from socket to position (or "registered but silent"), since
 * SOCKETs are arbitrary values that cannot index an array.  Add, modify
 * and del are O(1) on average; del swaps the last entry into the hole.
 * wait polls the table's snapshot, so it can run without the caller's
 * lock while add/modify/del go on (changes take effect at the next wait;
 * the core wakes the waiter after each).  One thread waits at a time.
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
 *  - A socket closed while registered: POLLNVAL, reported as TAXI_EV_ERR
 *    with TAXI__EV_CLOSED (the core checks the socket before it
 *    believes it).
 *    But under wine (8.0) a socket closed just as the call starts can
 *    fail the whole call with WSAENOTSOCK, and that happens in normal use:
 *    a close hook closes a socket right after its removal while the
 *    waiter may still poll the snapshot taken before it (seen in the pool
 *    stress tests).  The closed entries are then reported so too
 *    (their tokens are stale after a removal, which the core recognises)
 *    and the next wait polls a fresh snapshot, instead of failing the
 *    dispatcher.
 *  - A peer's orderly close is POLLHUP without POLLRDNORM (on Windows and
 *    under wine alike): reported as TAXI_EV_READ | TAXI_EV_HUP to a socket
 *    watched for reading, as POSIX poll reports it.
 */
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_WSAPOLL

#include "pollfd_table.h"
#include "readiness.h"

#include "core/common/alloc.h"
#include "core/common/handle_map.h"
#include "ports/win32/win32_impl.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

typedef struct wp_state {
  taxi__pollfd_table_t table; /* of WSAPOLLFD; its lock guards `where` */
  taxi__handle_map_t where; /* socket -> TAXI__POLLFD_SILENT or position + 1 */
} wp_state_t;

static short wp_mask(unsigned events) {
  short mask = 0;
  if (events & TAXI_EV_READ) mask |= POLLRDNORM;
  if (events & TAXI_EV_WRITE) mask |= POLLWRNORM;
  return mask;
}

static unsigned wp_events_out(const void *entry) {
  SHORT events = ((const WSAPOLLFD *)entry)->events;
  SHORT revents = ((const WSAPOLLFD *)entry)->revents;
  unsigned ev = 0;
  if (revents & (POLLRDNORM | POLLRDBAND)) ev |= TAXI_EV_READ;
  /* A peer's orderly close comes as POLLHUP alone (POSIX poll adds
   * POLLIN): a reader must still be told, and its read then returns 0. */
  if ((revents & POLLHUP) && (events & POLLRDNORM)) ev |= TAXI_EV_READ;
  if (revents & POLLWRNORM) ev |= TAXI_EV_WRITE;
  if (revents & POLLHUP) ev |= TAXI_EV_HUP;
  if (revents & (POLLERR | POLLNVAL)) ev |= TAXI_EV_ERR;
  if (revents & POLLNVAL) ev |= TAXI__EV_CLOSED;
  return ev;
}

/* The table's taxi__pollfd_ops_t: places in the map `where`, WSAPOLLFD. */
static uint32_t wp_where_get(void *ctx, taxi_handle_t h) {
  wp_state_t *s = ctx;
  uint32_t w;
  return taxi__handle_map_get(&s->where, h, &w) == 0 ? w : TAXI__POLLFD_UNKNOWN;
}

/* The map update replaces a present key's value, which needs no memory. */
static int wp_where_set(void *ctx, taxi_handle_t h, uint32_t where) {
  wp_state_t *s = ctx;
  (void)taxi__handle_map_del(&s->where, h);
  if (where == TAXI__POLLFD_UNKNOWN) return 0;
  return taxi__handle_map_put(&s->where, h, where);
}

static void wp_fill(void *entry, taxi_handle_t h) {
  ((WSAPOLLFD *)entry)->fd = (SOCKET)h;
}

static taxi_handle_t wp_handle_of(const void *entry) {
  return (taxi_handle_t)((const WSAPOLLFD *)entry)->fd;
}

static const taxi__pollfd_ops_t wp_table_ops = {
    .where_get = wp_where_get,
    .where_set = wp_where_set,
    .fill = wp_fill,
    .handle_of = wp_handle_of,
    .mask = wp_mask,
    .events_offset = offsetof(WSAPOLLFD, events),
};

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
  rc = taxi__pollfd_table_init(&s->table, sizeof(WSAPOLLFD), &wp_table_ops, s);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  taxi__handle_map_init(&s->where);
  *state = s;
  return 0;
}

static void wp_close(void *state) {
  wp_state_t *s = state;
  if (!s) return;
  taxi__handle_map_destroy(&s->where);
  taxi__pollfd_table_destroy(&s->table);
  taxi__free(s);
}

static int wp_add(void *state, taxi_handle_t h, uint64_t token, unsigned events,
                  unsigned flags) {
  wp_state_t *s = state;
  int rc = wp_check(h, events);
  (void)flags; /* no one-shot arming (no TAXI_CAP_ONESHOT) */
  if (rc < 0) return rc;
  rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  if (!taxi__is_socket(h)) return TAXI_ENOTSUP;
  return taxi__pollfd_table_add(&s->table, h, token, events);
}

static int wp_modify(void *state, taxi_handle_t h, uint64_t token,
                     unsigned events, unsigned flags) {
  wp_state_t *s = state;
  int rc = wp_check(h, events);
  (void)flags;
  if (rc < 0) return rc;
  return taxi__pollfd_table_modify(&s->table, h, token, events);
}

static int wp_del(void *state, taxi_handle_t h) {
  wp_state_t *s = state;
  return taxi__pollfd_table_del(&s->table, h);
}

/* The call failed: if a socket of the snapshot has been closed since the
 * snapshot was taken, that is why, and those entries are reported closed
 * (see the quirks above); 0 when none is found (the next
 * wait takes a fresh snapshot).  Otherwise the error, as TAXI_E*. */
static int wp_failed(wp_state_t *s, int err, taxi__ready_t *out, size_t max) {
  const taxi__pollfd_set_t *snap = &s->table.snap;
  const WSAPOLLFD *fds = snap->fds;
  size_t k = 0;
  bool closed = false;
  if (err == WSAEINTR) return 0;
  for (size_t i = 0; i < snap->count; i++) {
    if (taxi__is_socket((taxi_handle_t)fds[i].fd)) continue;
    closed = true;
    if (k < max) {
      out[k].token = snap->tokens[i];
      out[k].events = TAXI_EV_ERR | TAXI__EV_CLOSED;
      k++;
    }
  }
  return closed ? (int)k : taxi__error_from_os(err);
}

static int wp_wait(void *state, taxi__ready_t *out, size_t max,
                   int timeout_ms) {
  wp_state_t *s = state;
  int n, rc;
  rc = taxi__pollfd_table_wait_start(&s->table, out, &max);
  if (rc < 0) return rc;
  if (s->table.snap.count == 0) {
    /* See select_win32.c: an empty set cannot be waited on. */
    Sleep(timeout_ms < 0 ? 50 : (DWORD)timeout_ms);
    return 0;
  }
  if (timeout_ms < 0) timeout_ms = -1;
  n = WSAPoll(s->table.snap.fds, (ULONG)s->table.snap.count, timeout_ms);
  if (n == SOCKET_ERROR) return wp_failed(s, WSAGetLastError(), out, max);
  return taxi__pollfd_table_collect(&s->table, n, out, max, wp_events_out);
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
