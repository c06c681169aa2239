/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/poll.c - the POSIX poll(2) readiness backend.
 *
 * The set lives here, not in the kernel: a packed array of struct pollfd
 * holding the handles that are watched for something and their tokens
 * (backends/pollfd_table.h, shared with wsapoll.c), and a table indexed
 * by descriptor that says where each registered handle sits (or that it
 * is registered but silent).  Add, modify and del are O(1); del swaps the
 * last entry into the hole.
 *
 * wait polls the table's snapshot, without the caller's lock,
 * concurrently with add/modify/del.  Changes made during a wait take
 * effect at the next one; the core wakes the waiter after each change (no
 * TAXI_CAP_LIVE_UPDATE).  Only one thread waits at a time (no
 * TAXI_CAP_MULTI_WAIT).  Tokens reported are the snapshot's, i.e. those
 * given at add or modify time; one for a handle deleted since is stale,
 * which the core recognises.
 *
 * Quirks handled here, each where it is handled:
 *  - POLLRDHUP is Linux-only (2.6.17) and needs _GNU_SOURCE.
 *  - POLLNVAL for a descriptor closed while registered, and on macOS for
 *    any device (macOS poll(2), BUGS: "poll() ... does not support
 *    devices"): both reported as TAXI_EV_ERR with TAXI__EV_CLOSED, which
 *    the core believes only when it finds the handle closed (or the
 *    number another file's) itself.
 *  - EAGAIN from poll on FreeBSD and macOS (poll(2), ERRORS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POLLRDHUP in glibc's <poll.h> */
#endif
#include "config.h"

#include <stdbool.h>

#if TAXI_HAVE_POLL

#include "pollfd_table.h"
#include "readiness.h"

#include "core/common/alloc.h"
#include "ports/port.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>

#define POLL_MIN_CAP 64u

#ifdef POLLRDHUP
#define POLL_PEER_CLOSED (POLLHUP | POLLRDHUP)
#else
#define POLL_PEER_CLOSED POLLHUP
#endif

typedef struct poll_state {
  taxi__pollfd_table_t table; /* of struct pollfd; its lock guards `where` */
  uint32_t *where; /* [where_cap] by descriptor: TAXI__POLLFD_* or index + 1 */
  size_t where_cap;
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

static unsigned poll_events_out(const void *entry) {
  short revents = ((const struct pollfd *)entry)->revents;
  unsigned ev = 0;
  if (revents & POLLIN) ev |= TAXI_EV_READ;
  if (revents & POLLOUT) ev |= TAXI_EV_WRITE;
  if (revents & POLLPRI) ev |= TAXI_EV_EXCEPT;
  if (revents & POLL_PEER_CLOSED) ev |= TAXI_EV_HUP;
  /* POLLNVAL: the descriptor is not open (closed by the application while
   * still registered), or on macOS a device poll() cannot watch: the core
   * tells them apart (core/reactor/reactor_closed.c). */
  if (revents & (POLLERR | POLLNVAL)) ev |= TAXI_EV_ERR;
  if (revents & POLLNVAL) ev |= TAXI__EV_CLOSED;
  return ev;
}

/* Make where[fd] addressable; new rows are TAXI__POLLFD_UNKNOWN. */
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

/* The table's taxi__pollfd_ops_t: places in `where`, struct pollfd. */
static uint32_t poll_where_get(void *ctx, taxi_handle_t fd) {
  const poll_state_t *s = ctx;
  return (size_t)fd < s->where_cap ? s->where[fd] : TAXI__POLLFD_UNKNOWN;
}

static int poll_where_set(void *ctx, taxi_handle_t fd, uint32_t where) {
  poll_state_t *s = ctx;
  int rc = poll_where_reserve(s, fd);
  if (rc == 0) s->where[fd] = where;
  return rc;
}

static void poll_fill(void *entry, taxi_handle_t fd) {
  ((struct pollfd *)entry)->fd = fd;
}

static taxi_handle_t poll_handle_of(const void *entry) {
  return ((const struct pollfd *)entry)->fd;
}

static const taxi__pollfd_ops_t poll_table_ops = {
    .where_get = poll_where_get,
    .where_set = poll_where_set,
    .fill = poll_fill,
    .handle_of = poll_handle_of,
    .mask = poll_mask,
    .events_offset = offsetof(struct pollfd, events),
};

/* Checks common to add and modify, made before taking the lock.  Only a
 * handle being added (`is_new`) is checked for being open: a known one is
 * re-armed after every event in pool mode, where a system call per event
 * is not wanted, and one closed since shows up in the wait.  Nor is one
 * the library has just accepted or made (TAXI__ARM_OPEN). */
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
  rc = taxi__pollfd_table_init(&s->table, sizeof(struct pollfd),
                               &poll_table_ops, s);
  if (rc < 0) {
    taxi__free(s);
    return rc;
  }
  *state = s;
  return 0;
}

static void poll_close(void *state) {
  poll_state_t *s = state;
  if (!s) return;
  taxi__pollfd_table_destroy(&s->table);
  taxi__free(s->where);
  taxi__free(s);
}

static int poll_add(void *state, taxi_handle_t h, uint64_t token,
                    unsigned events, unsigned flags) {
  poll_state_t *s = state;
  /* No one-shot arming here (no TAXI_CAP_ONESHOT); a handle the library
   * has just made is open. */
  int rc = poll_check(h, events, !(flags & TAXI__ARM_OPEN));
  if (rc < 0) return rc;
  return taxi__pollfd_table_add(&s->table, h, token, events);
}

static int poll_modify(void *state, taxi_handle_t h, uint64_t token,
                       unsigned events, unsigned flags) {
  poll_state_t *s = state;
  int rc = poll_check(h, events, false);
  (void)flags;
  if (rc < 0) return rc;
  return taxi__pollfd_table_modify(&s->table, h, token, events);
}

static int poll_del(void *state, taxi_handle_t h) {
  poll_state_t *s = state;
  if (h < 0) return TAXI_ENOENT;
  /* No handle check: a handle the application closed first is simply
   * forgotten. */
  return taxi__pollfd_table_del(&s->table, h);
}

static int poll_wait(void *state, taxi__ready_t *out, size_t max,
                     int timeout_ms) {
  poll_state_t *s = state;
  int n, rc;
  rc = taxi__pollfd_table_wait_start(&s->table, out, &max);
  if (rc < 0) return rc;
  if (timeout_ms < 0) timeout_ms = -1;
  n = poll(s->table.snap.fds, (nfds_t)s->table.snap.count, timeout_ms);
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
  return taxi__pollfd_table_collect(&s->table, n, out, max, poll_events_out);
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
