/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/epoll.c - the Linux epoll(7) readiness backend.
 *
 * The kernel keeps the interest set, so this file holds no table of its
 * own: add/modify/del are one epoll_ctl(2) each, the token travels in
 * epoll_event.data.u64, and any number of threads may sit in epoll_wait(2)
 * on the same set while others change it (TAXI_CAP_MULTI_WAIT,
 * TAXI_CAP_LIVE_UPDATE).  One-shot arming is EPOLLONESHOT (Linux 2.6.2),
 * re-armed by the next EPOLL_CTL_MOD; edge triggering (TAXI__ARM_EDGE) is
 * EPOLLET, whose EPOLL_CTL_MOD polls the file again and reports it if it is
 * ready then (fs/eventpoll.c, ep_modify), as a fresh edge.
 *
 * Quirks handled here, each where it is handled:
 *  - EPOLLHUP and EPOLLERR are reported even when not asked for
 *    (epoll_ctl(2)): a handle modified to report nothing is armed with
 *    EPOLLONESHOT so that a hang-up wakes a wait at most once.
 *  - EPOLL_CTL_ADD of a regular file or directory fails with EPERM.
 *  - EPOLL_CTL_DEL needed a non-NULL event before Linux 2.6.9.
 *  - EPOLLRDHUP exists only since Linux 2.6.17.
 *
 * What the core must know: a registration belongs to the open file
 * description, not to the descriptor number (epoll(7), Q6).  If the
 * application closes a descriptor while a dup(2) of it stays open, the
 * kernel keeps reporting it, with the token it was given, until the last
 * copy is closed; del then fails with EBADF, reported as success.  Hence
 * too EPOLL_CTL_MOD of a number closed since it was added fails: EBADF
 * when it is not open, ENOENT when it names another file now, which is
 * how the core finds a handle closed under it
 * (TAXI__EXT_MODIFY_TELLS_CLOSED).
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1 /* glibc hides POSIX under -std=c11 without it */
#endif
#include "config.h"

#if TAXI_HAVE_EPOLL

#include "readiness.h"

#include "core/common/alloc.h"
#include "ports/port.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Events one wait collects.  Each waiter needs its own array (several
 * threads may wait at once), so it lives on the stack; 128 entries are
 * 1.5 to 2 KiB.  More would not help: the core dispatches a few events per
 * wait, and level-triggered handles left over are reported again. */
#define EPOLL_BATCH 128

#ifdef EPOLLRDHUP
#define EPOLL_PEER_CLOSED (EPOLLHUP | EPOLLRDHUP)
#else
#define EPOLL_PEER_CLOSED EPOLLHUP
#endif

typedef struct epoll_state {
  int epfd;
} epoll_state_t;

/* Map an epoll_ctl/epoll_wait errno to a TAXI_E* code, recording it.  The
 * codes the readiness contract names are mapped here rather than left to
 * the port's general table, so their meaning is fixed. */
static int epoll_error(int err) {
  switch (err) {
    case EBADF:
      taxi__set_os_error(err);
      return TAXI_EBADF;
    case EEXIST:
      taxi__set_os_error(err);
      return TAXI_EEXIST;
    case ENOENT:
      taxi__set_os_error(err);
      return TAXI_ENOENT;
    case ENOMEM:
      taxi__set_os_error(err);
      return TAXI_ENOMEM;
    case EPERM:
      /* epoll_ctl(2): "The target file fd does not support epoll", e.g. a
       * regular file or a directory. */
      taxi__set_os_error(err);
      return TAXI_ENOTSUP;
    case ENOSPC:
      /* epoll_ctl(2): /proc/sys/fs/epoll/max_user_watches reached. */
      taxi__set_os_error(err);
      return TAXI_ETOOMANY;
    default:
      return taxi__error_from_os(err);
  }
}

static uint32_t epoll_mask(unsigned events, unsigned flags) {
  uint32_t mask = 0;
  if (events & TAXI_EV_READ) {
    mask |= EPOLLIN;
#ifdef EPOLLRDHUP
    /* Asked with READ only: a half-closed peer matters to a reader, and
     * a writer learns of it from EPOLLERR/EPOLLHUP or its next write. */
    mask |= EPOLLRDHUP;
#endif
  }
  if (events & TAXI_EV_WRITE) mask |= EPOLLOUT;
  if (events & TAXI_EV_EXCEPT) mask |= EPOLLPRI;
  /* A handle that should report nothing is armed one-shot as well: the
   * kernel adds EPOLLHUP|EPOLLERR to every mask (epoll_ctl(2), and
   * fs/eventpoll.c does so on EPOLL_CTL_MOD too), so a hung-up socket with
   * a plain mask of 0 would wake every level-triggered epoll_wait forever.
   * With EPOLLONESHOT it is reported at most once, after which the kernel
   * disables the item until the next modify; the core drops that report
   * for a suspended handle. */
  if ((flags & TAXI__ARM_ONESHOT) || mask == 0)
    mask |= EPOLLONESHOT;
  else if (flags & TAXI__ARM_EDGE)
    mask |= EPOLLET;
  return mask;
}

static unsigned epoll_events_out(uint32_t mask) {
  unsigned ev = 0;
  if (mask & EPOLLIN) ev |= TAXI_EV_READ;
  if (mask & EPOLLOUT) ev |= TAXI_EV_WRITE;
  if (mask & EPOLLPRI) ev |= TAXI_EV_EXCEPT;
  if (mask & EPOLL_PEER_CLOSED) ev |= TAXI_EV_HUP;
  if (mask & EPOLLERR) ev |= TAXI_EV_ERR;
  return ev;
}

static int epoll_open(void **state) {
  epoll_state_t *s = taxi__malloc(sizeof *s);
  if (!s) return TAXI_ENOMEM;
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (s->epfd < 0) {
    int err = errno;
    taxi__free(s);
    /* A kernel without epoll, or a seccomp filter refusing it: let the
     * core move on to the next backend. */
    if (err == ENOSYS) {
      taxi__set_os_error(err);
      return TAXI_ENOTSUP;
    }
    return taxi__error_from_os(err);
  }
  *state = s;
  return 0;
}

/* After fork(2) the epoll set is shared with the parent: closing our
 * descriptor drops only our reference and deregisters nothing. */
static void epoll_close(void *state) {
  epoll_state_t *s = state;
  if (!s) return;
  close(s->epfd);
  taxi__free(s);
}

static int epoll_ctl_op(epoll_state_t *s, int op, taxi_handle_t h,
                        uint64_t token, unsigned events, unsigned flags) {
  struct epoll_event ev;
  if (h < 0) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  ev.events = epoll_mask(events, flags);
  ev.data.u64 = token;
  if (epoll_ctl(s->epfd, op, h, &ev) < 0) return epoll_error(errno);
  return 0;
}

static int epoll_add(void *state, taxi_handle_t h, uint64_t token,
                     unsigned events, unsigned flags) {
  return epoll_ctl_op(state, EPOLL_CTL_ADD, h, token, events, flags);
}

static int epoll_modify(void *state, taxi_handle_t h, uint64_t token,
                        unsigned events, unsigned flags) {
  return epoll_ctl_op(state, EPOLL_CTL_MOD, h, token, events, flags);
}

static int epoll_del(void *state, taxi_handle_t h) {
  epoll_state_t *s = state;
  /* Ignored by the kernel, but Linux before 2.6.9 required a non-NULL
   * pointer here (epoll_ctl(2), BUGS). */
  struct epoll_event unused = {0};
  if (h < 0) return TAXI_ENOENT;
  if (epoll_ctl(s->epfd, EPOLL_CTL_DEL, h, &unused) == 0) return 0;
  /* EBADF: the application closed the handle first, and closing the last
   * descriptor of a file removes it from every epoll set (epoll(7)). */
  if (errno == EBADF) return 0;
  return epoll_error(errno);
}

static int epoll_wait_ready(void *state, taxi__ready_t *out, size_t max,
                            int timeout_ms) {
  epoll_state_t *s = state;
  struct epoll_event evs[EPOLL_BATCH];
  int want = max < EPOLL_BATCH ? (int)max : EPOLL_BATCH;
  int n;
  if (!out || max == 0) return TAXI_EINVAL;
  if (timeout_ms < 0) timeout_ms = -1;
  /* A single call: a second non-blocking epoll_wait to fill a larger `max`
   * could report a level-triggered handle twice, because the kernel puts
   * each item it reported back at the tail of its ready list. */
  n = epoll_wait(s->epfd, evs, want, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return epoll_error(errno);
  }
  for (int i = 0; i < n; i++) {
    out[i].token = evs[i].data.u64;
    out[i].events = epoll_events_out(evs[i].events);
  }
  return n;
}

const taxi__readiness_ops_t taxi__backend_epoll = {
    .name = "epoll",
    .caps = TAXI_CAP_ONESHOT | TAXI_CAP_MULTI_WAIT | TAXI_CAP_EDGE |
            TAXI_CAP_LIVE_UPDATE | TAXI_CAP_EXCEPT,
    .max_handles = 0,
    .ext = TAXI__EXT_CLOSE_DEREGISTERS | TAXI__EXT_MODIFY_TELLS_CLOSED,
    .open = epoll_open,
    .close = epoll_close,
    .add = epoll_add,
    .modify = epoll_modify,
    .del = epoll_del,
    .wait = epoll_wait_ready,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_epoll_absent;
#endif /* TAXI_HAVE_EPOLL */
