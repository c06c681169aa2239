/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/kqueue.c - the BSD and macOS kqueue(2) readiness backend.
 *
 * Each handle is up to two knotes (EVFILT_READ, EVFILT_WRITE) carrying its
 * token in udata; the kernel keeps the set, so any number of threads may
 * wait while others change it (TAXI_CAP_MULTI_WAIT, TAXI_CAP_LIVE_UPDATE).
 * Read and write readiness of one handle are separate kernel events: with
 * several waiters or EV_DISPATCH, one thread may receive TAXI_EV_READ for
 * a handle while another receives TAXI_EV_WRITE for it.  A byte per
 * descriptor, touched by add, modify and del only (the caller serialises
 * them), records which knotes exist and how they were made.  Why filters
 * are only disabled, EV_RECEIPT, EV_DISPATCH re-armed with EV_ADD, edge
 * triggering as EV_CLEAR, and the
 * optional parts: docs/backends/kqueue.md.  Quirks (fork, close removing
 * knotes, refused filters, 32-bit udata) are noted where handled.
 */
#include "config.h"

#if TAXI_HAVE_KQUEUE

#include "readiness.h"

#include "core/common/alloc.h"
#include "ports/port.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
/* <sys/types.h> first: before FreeBSD 12, <sys/event.h> did not parse
 * without it (kqueue(2), BUGS). */
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>

/* Events one wait collects.  Each waiter needs its own array (several
 * threads may wait at once), so it lives on the stack: 64 entries are
 * 2 KiB (macOS) to 4 KiB (FreeBSD 12 and later). */
#define KQ_BATCH 64

/* At most one change per filter per call. */
#define KQ_MAX_CHANGES 2

/* Per-descriptor state bits. */
#define KQ_KNOWN 0x1u    /* registered with this backend */
#define KQ_READ 0x2u     /* an EVFILT_READ knote exists */
#define KQ_WRITE 0x4u    /* an EVFILT_WRITE knote exists */
#define KQ_DISPATCH 0x8u /* the knotes were created with EV_DISPATCH */
#define KQ_CLEAR 0x10u   /* the knotes were created with EV_CLEAR */
#define KQ_MODE (KQ_DISPATCH | KQ_CLEAR)
#define KQ_FILTERS (KQ_READ | KQ_WRITE)

#ifdef EV_DISPATCH
#define KQ_CAP_ONESHOT TAXI_CAP_ONESHOT
#else
#define KQ_CAP_ONESHOT 0u
#endif

/* Edge triggering (EV_CLEAR) is offered over a kernel's kqueue only.
 * libkqueue makes one epoll event of a descriptor watched both ways into
 * two kevents, and when they overflow the caller's array it drops the rest
 * of the epoll batch, already taken from epoll: a level or EV_DISPATCH
 * knote is reported again by the next wait, an EV_CLEAR one not before its
 * condition changes again, and a stream that waits for it stalls
 * (docs/backends.md, "kqueue, tested on Linux").  Without the capability
 * the pools arm one-shot there. */
#if defined(TAXI_KQUEUE_IS_LIBKQUEUE)
#define KQ_CAP_EDGE 0u
#else
#define KQ_CAP_EDGE TAXI_CAP_EDGE
#endif

typedef struct kq_state {
  int kq;
  pid_t owner;          /* the process the kqueue belongs to */
  uint64_t wake_token;  /* what the EVFILT_USER wake-up reports */
  unsigned char *table; /* [table_cap] KQ_* bits by descriptor */
  size_t table_cap;
} kq_state_t;

/* A handful of changes and, after kq_apply(), the errno of each. */
typedef struct kq_batch {
  struct kevent change[KQ_MAX_CHANGES];
  unsigned char bit[KQ_MAX_CHANGES]; /* KQ_READ or KQ_WRITE */
  int err[KQ_MAX_CHANGES];
  int n;
} kq_batch_t;

static const struct kq_filter {
  int filter;
  unsigned event;    /* TAXI_EV_* */
  unsigned char bit; /* KQ_* */
} kq_filters[2] = {
    {EVFILT_READ, TAXI_EV_READ, KQ_READ},
    {EVFILT_WRITE, TAXI_EV_WRITE, KQ_WRITE},
};

/* Map a kevent errno to a TAXI_E* code, recording it. */
static int kq_error(int err) {
  switch (err) {
    case EBADF:
      taxi__set_os_error(err);
      return TAXI_EBADF;
    case ENOENT:
      taxi__set_os_error(err);
      return TAXI_ENOENT;
    case ENOMEM:
      taxi__set_os_error(err);
      return TAXI_ENOMEM;
    case EINVAL:
#ifdef ENODEV
    case ENODEV:
#endif
      /* kqueue(2): the filter cannot watch this kind of descriptor (e.g.
       * EVFILT_WRITE on a FreeBSD vnode, a device on macOS). */
      taxi__set_os_error(err);
      return TAXI_ENOTSUP;
    default:
      return taxi__error_from_os(err);
  }
}

static unsigned short kq_arm_flags(unsigned flags) {
#ifdef EV_DISPATCH
  if (flags & TAXI__ARM_ONESHOT) return EV_DISPATCH;
#endif
  if (flags & TAXI__ARM_EDGE) return EV_CLEAR;
  return 0;
}

static unsigned char kq_mode(unsigned flags) {
  if (flags & TAXI__ARM_ONESHOT) return KQ_DISPATCH;
  return (flags & TAXI__ARM_EDGE) ? KQ_CLEAR : 0;
}

static void kq_push(kq_batch_t *b, taxi_handle_t h, const struct kq_filter *f,
                    unsigned short flags, uint64_t token) {
  EV_SET(&b->change[b->n], (uintptr_t)h, f->filter, flags, 0, 0,
         (void *)(uintptr_t)token);
  b->bit[b->n] = f->bit;
  b->err[b->n] = 0;
  b->n++;
}

#ifdef EV_RECEIPT
/* The receipt's change: matched by filter, of which a batch has at most
 * one per descriptor. */
static int kq_receipt_index(const kq_batch_t *b, const struct kevent *r) {
  for (int i = 0; i < b->n; i++)
    if (b->change[i].ident == r->ident && b->change[i].filter == r->filter)
      return i;
  return -1;
}
#endif

/* Apply the batch; afterwards b->err[i] is 0 or the errno of change i. */
static void kq_apply(kq_state_t *s, kq_batch_t *b) {
#ifdef EV_RECEIPT
  struct kevent receipt[KQ_MAX_CHANGES];
  const struct timespec zero = {0, 0};
  int got;
  for (int i = 0; i < b->n; i++) {
    b->change[i].flags |= EV_RECEIPT;
    /* Each change yields exactly one receipt; one that did not is counted
     * as failed rather than guessed at. */
    b->err[i] = EIO;
  }
  /* The event list has room for every receipt, so kevent neither stops
   * early nor returns pending events; the zero timeout keeps it from
   * blocking in any case.  After EINTR every change has been applied
   * (FreeBSD kqueue(2), ERRORS) but the receipts are lost: applying the
   * batch again reports them, and is harmless (EV_ADD of an existing knote
   * modifies it; a second EV_DELETE gets ENOENT, which callers accept). */
  do {
    /* libkqueue fills a receipt's data from errno even where the change
     * failed without setting it (re-adding an existing socket knote: the
     * knote is enabled, then the modify step refuses), so a stale EAGAIN
     * from the application's last read would read as this change's
     * failure.  With errno cleared such a receipt carries 0, which is
     * what FreeBSD reports for re-adding an existing knote: success.
     * Harmless where kevent fills data itself. */
    errno = 0;
    got = kevent(s->kq, b->change, b->n, receipt, b->n, &zero);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    int err = errno;
    for (int i = 0; i < b->n; i++) b->err[i] = err;
    return;
  }
  for (int j = 0; j < got; j++) {
    int i = kq_receipt_index(b, &receipt[j]);
    if (i >= 0 && (receipt[j].flags & EV_ERROR))
      b->err[i] = (int)receipt[j].data;
  }
#else
  /* With an empty event list kevent returns at once and fails with the
   * change's own errno (kqueue(2)). */
  for (int i = 0; i < b->n; i++)
    b->err[i] = kevent(s->kq, &b->change[i], 1, NULL, 0, NULL) < 0 ? errno : 0;
#endif
}

/* Make table[fd] addressable; new rows are 0 (unknown). */
static int kq_reserve(kq_state_t *s, taxi_handle_t fd) {
  size_t need = (size_t)fd + 1;
  size_t cap = s->table_cap ? s->table_cap : 64;
  unsigned char *table;
  if (need <= s->table_cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return TAXI_ENOMEM;
    cap *= 2;
  }
  table = taxi__realloc(s->table, cap);
  if (!table) return TAXI_ENOMEM;
  memset(table + s->table_cap, 0, cap - s->table_cap);
  s->table = table;
  s->table_cap = cap;
  return 0;
}

static int kq_known(const kq_state_t *s, taxi_handle_t h) {
  return h >= 0 && (size_t)h < s->table_cap && (s->table[h] & KQ_KNOWN);
}

static int kq_check(taxi_handle_t h, unsigned events, unsigned flags) {
  if (h < 0) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  /* Out-of-band data has no documented filter (EV_OOBAND is a
   * macOS-private flag on EVFILT_READ), hence no TAXI_CAP_EXCEPT. */
  if (events & TAXI_EV_EXCEPT) return TAXI_ENOTSUP;
#ifndef EV_DISPATCH
  if (flags & TAXI__ARM_ONESHOT) return TAXI_ENOTSUP;
#endif
  (void)flags;
  return 0;
}

/* Delete the knotes *st says exist, clearing their bits.  Knotes already
 * gone (ENOENT, or EBADF: the descriptor was closed, which removed them)
 * count as deleted.  Returns 0 or the first other error. */
static int kq_drop(kq_state_t *s, taxi_handle_t h, unsigned char *st) {
  kq_batch_t b = {.n = 0};
  int rc = 0;
  for (int f = 0; f < 2; f++)
    if (*st & kq_filters[f].bit) kq_push(&b, h, &kq_filters[f], EV_DELETE, 0);
  if (b.n == 0) return 0;
  kq_apply(s, &b);
  for (int i = 0; i < b.n; i++) {
    int err = b.err[i];
    if (err == 0 || err == ENOENT || err == EBADF)
      *st &= (unsigned char)~b.bit[i];
    else if (rc == 0)
      rc = kq_error(err);
  }
  return rc;
}

static int kq_open(void **state) {
#if UINTPTR_MAX < UINT64_MAX
  /* Tokens are 64 bits (the core keeps a generation in the high half) and
   * udata holds only a pointer's width: rather than deliver events with
   * truncated tokens, let the core use the next backend. */
  (void)state;
  return TAXI_ENOTSUP;
#else
  kq_state_t *s = taxi__calloc(1, sizeof *s);
  int err;
  if (!s) return TAXI_ENOMEM;
#if defined(HAVE_KQUEUE1) && defined(O_CLOEXEC)
  /* NetBSD 6, FreeBSD 14: atomic close-on-exec. */
  s->kq = kqueue1(O_CLOEXEC);
#else
  /* No race worth closing here: a kqueue is not inherited by fork(2), so
   * another thread's fork+exec cannot leak it between the two calls. */
  s->kq = kqueue();
  if (s->kq >= 0 && fcntl(s->kq, F_SETFD, FD_CLOEXEC) < 0) {
    err = errno;
    close(s->kq);
    taxi__free(s);
    return taxi__error_from_os(err);
  }
#endif
  if (s->kq < 0) {
    err = errno;
    taxi__free(s);
    if (err == ENOSYS) {
      taxi__set_os_error(err);
      return TAXI_ENOTSUP;
    }
    return taxi__error_from_os(err);
  }
  s->owner = getpid();
  *state = s;
  return 0;
#endif
}

static void kq_close(void *state) {
  kq_state_t *s = state;
  if (!s) return;
  /* In a child of fork(2) the kqueue was not inherited (kqueue(2)); the
   * number may name one of the child's own files by now. */
  if (s->owner == getpid()) close(s->kq);
  taxi__free(s->table);
  taxi__free(s);
}

static int kq_add(void *state, taxi_handle_t h, uint64_t token, unsigned events,
                  unsigned flags) {
  kq_state_t *s = state;
  kq_batch_t b = {.n = 0};
  unsigned char st = (unsigned char)(KQ_KNOWN | kq_mode(flags));
  int rc = kq_check(h, events, flags);
  if (rc < 0) return rc;
  if (kq_known(s, h)) return TAXI_EEXIST;
  rc = kq_reserve(s, h);
  if (rc < 0) return rc;

  for (int f = 0; f < 2; f++)
    if (events & kq_filters[f].event)
      kq_push(&b, h, &kq_filters[f],
              (unsigned short)(EV_ADD | EV_ENABLE | kq_arm_flags(flags)),
              token);
  if (b.n == 0) {
    /* Nothing to register yet: no kevent call to find a closed one. */
    rc = taxi__handle_check(h);
    if (rc < 0) return rc;
    s->table[h] = st;
    return 0;
  }

  kq_apply(s, &b);
  for (int i = 0; i < b.n; i++) {
    if (b.err[i] == 0) {
      st |= b.bit[i];
    } else if (rc == 0) {
      rc = kq_error(b.err[i]);
    }
  }
  if (rc < 0) {
    /* All or nothing: remove the filter that did register. */
    (void)kq_drop(s, h, &st);
    return rc;
  }
  s->table[h] = st;
  return 0;
}

static int kq_modify(void *state, taxi_handle_t h, uint64_t token,
                     unsigned events, unsigned flags) {
  kq_state_t *s = state;
  kq_batch_t b = {.n = 0};
  unsigned char st;
  int rc = kq_check(h, events, flags);
  if (rc < 0) return rc;
  if (!kq_known(s, h)) {
    rc = taxi__handle_check(h);
    return rc < 0 ? rc : TAXI_ENOENT;
  }
  st = s->table[h];

  if (events) {
    /* A knote keeps the EV_DISPATCH or EV_CLEAR it was created with
     * (EV_ADD on an existing knote updates only udata, fflags and data):
     * switching between one-shot, edge and level arming needs new
     * knotes. */
    if ((st & KQ_FILTERS) && (st & KQ_MODE) != kq_mode(flags)) {
      rc = kq_drop(s, h, &st);
      if (rc < 0) {
        s->table[h] = st;
        return rc;
      }
    }
    st = (unsigned char)((st & ~KQ_MODE) | kq_mode(flags));
  }

  /* Every change carries the token: kevent stores udata on any change to
   * an existing knote (FreeBSD, macOS), not only on EV_ADD. */
  for (int f = 0; f < 2; f++) {
    const struct kq_filter *kf = &kq_filters[f];
    if (events & kf->event)
      kq_push(&b, h, kf,
              (unsigned short)(EV_ADD | EV_ENABLE | kq_arm_flags(flags)),
              token);
    else if (st & kf->bit)
      kq_push(&b, h, kf, EV_DISABLE, token);
  }
  if (b.n == 0) {
    s->table[h] = st;
    return taxi__handle_check(h);
  }

  kq_apply(s, &b);
  for (int i = 0; i < b.n; i++) {
    int err = b.err[i];
    if (b.change[i].flags & EV_ADD) {
      if (err == 0)
        st |= b.bit[i];
      else if (rc == 0)
        rc = kq_error(err);
    } else if (err == ENOENT) {
      /* The knote to disable is gone: the descriptor was closed (and the
       * number reused).  Nothing is reported for it, as asked. */
      st &= (unsigned char)~b.bit[i];
    } else if (err != 0 && rc == 0) {
      rc = kq_error(err);
    }
  }
  s->table[h] = st;
  return rc;
}

static int kq_del(void *state, taxi_handle_t h) {
  kq_state_t *s = state;
  unsigned char st;
  int rc;
  if (!kq_known(s, h)) return TAXI_ENOENT;
  st = s->table[h];
  rc = kq_drop(s, h, &st);
  /* Forgotten even if a deletion failed: a knote left behind reports a
   * token the core no longer honours. */
  s->table[h] = 0;
  return rc;
}

static unsigned kq_events_out(const struct kevent *ev) {
  unsigned out;
  /* EV_ERROR: data holds an errno for this knote. */
  if (ev->flags & EV_ERROR) return TAXI_EV_ERR;
#if TAXI_HAVE_KQUEUE_USER
  if (ev->filter == EVFILT_USER) return TAXI_EV_READ;
#endif
#if TAXI_HAVE_KQUEUE_SIGNAL
  if (ev->filter == EVFILT_SIGNAL) return TAXI_EV_READ;
#endif
  if (ev->filter == EVFILT_READ)
    out = TAXI_EV_READ;
  else if (ev->filter == EVFILT_WRITE)
    out = TAXI_EV_WRITE;
  else
    return 0;
  /* EV_EOF: the peer shut down its side (read filter) or the reader went
   * away (write filter); for sockets fflags then holds the pending socket
   * error, if any (kqueue(2), EVFILT_READ and EVFILT_WRITE). */
  if (ev->flags & EV_EOF) {
    out |= TAXI_EV_HUP;
    if (ev->fflags != 0) out |= TAXI_EV_ERR;
  }
  return out;
}

/* The socket error an event carries: EV_EOF with an errno in fflags
 * (kqueue(2), EVFILT_READ and EVFILT_WRITE).  FreeBSD copies it and leaves
 * it pending on the socket; libkqueue reads it with SO_ERROR, which clears
 * it, so the reactor keeps it for the handler (TAXI__EXT_EVENT_ERROR). */
static int32_t kq_event_error(const struct kevent *ev) {
  if ((ev->flags & (EV_EOF | EV_ERROR)) != EV_EOF || ev->fflags == 0) return 0;
  if (ev->filter != EVFILT_READ && ev->filter != EVFILT_WRITE) return 0;
  return taxi__error_from_os((int)ev->fflags);
}

static int kq_wait(void *state, taxi__ready_t *out, size_t max,
                   int timeout_ms) {
  kq_state_t *s = state;
  struct kevent evs[KQ_BATCH];
  uintptr_t ident[KQ_BATCH];
  struct timespec ts, *tsp = NULL;
  int want = max < KQ_BATCH ? (int)max : KQ_BATCH;
  int n, k = 0;
  if (!out || max == 0) return TAXI_EINVAL;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    tsp = &ts;
  }
  n = kevent(s->kq, NULL, 0, evs, want, tsp);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return kq_error(errno);
  }
  for (int i = 0; i < n; i++) {
    unsigned ev = kq_events_out(&evs[i]);
    uint64_t token = (uint64_t)(uintptr_t)evs[i].udata;
    int32_t err = kq_event_error(&evs[i]);
    int j;
    if (!ev) continue;
    /* Read and write readiness of one handle are two kernel events: merge
     * them, so a wait reports each handle once. */
    for (j = 0; j < k; j++)
      if (ident[j] == evs[i].ident && out[j].token == token) break;
    if (j < k) {
      out[j].events |= ev;
      if (!out[j].error) out[j].error = err;
      continue;
    }
    ident[k] = evs[i].ident;
    out[k].token = token;
    out[k].events = ev;
    out[k].error = err;
    k++;
  }
  return k;
}

#if TAXI_HAVE_KQUEUE_USER
/* The wake-up: one EVFILT_USER event per kqueue (FreeBSD 8.1, macOS 10.6,
 * NetBSD 10, libkqueue), in a namespace of its own, so any ident does.
 * EV_CLEAR resets it as it is reported: one report per trigger, however
 * many waiters. */
#define KQ_WAKE_IDENT 1

static int kq_wakeup_change(kq_state_t *s, unsigned short flags,
                            unsigned fflags) {
  struct kevent ev;
  int rc;
  /* Each change carries the token: kevent stores udata on every change. */
  EV_SET(&ev, KQ_WAKE_IDENT, EVFILT_USER, flags, fflags, 0,
         (void *)(uintptr_t)s->wake_token);
  /* No event list: a failed change fails the call with its errno. */
  do rc = kevent(s->kq, &ev, 1, NULL, 0, NULL);
  while (rc < 0 && errno == EINTR);
  return rc < 0 ? kq_error(errno) : 0;
}

static int kq_wakeup_open(void *state, uint64_t token) {
  kq_state_t *s = state;
  s->wake_token = token;
  return kq_wakeup_change(s, EV_ADD | EV_CLEAR, 0);
}

static int kq_wakeup_signal(void *state) {
  return kq_wakeup_change(state, 0, NOTE_TRIGGER);
}
#define KQ_EXT_WAKEUP TAXI__EXT_WAKEUP
#else
#define KQ_EXT_WAKEUP 0u
#define kq_wakeup_open NULL
#define kq_wakeup_signal NULL
#endif

#if TAXI_HAVE_KQUEUE_SIGNAL
/* Signals: one EVFILT_SIGNAL event per signal, ident the signal number
 * (kqueue(2); every kqueue system, and libkqueue).  The kernel keeps
 * EV_CLEAR on it whatever is asked, so data counts arrivals since the last
 * report and one report stands for all of them; asking for it says so
 * here too. */
static int kq_signal_change(kq_state_t *s, int signo, unsigned short flags,
                            uint64_t token) {
  struct kevent ev;
  int rc;
  EV_SET(&ev, (uintptr_t)signo, EVFILT_SIGNAL, flags, 0, 0,
         (void *)(uintptr_t)token);
  do rc = kevent(s->kq, &ev, 1, NULL, 0, NULL);
  while (rc < 0 && errno == EINTR);
  return rc < 0 ? errno : 0;
}

static int kq_signal_add(void *state, int signo, uint64_t token) {
  int err =
      kq_signal_change(state, signo, EV_ADD | EV_ENABLE | EV_CLEAR, token);
  return err ? kq_error(err) : 0;
}

static int kq_signal_del(void *state, int signo) {
  int err = kq_signal_change(state, signo, EV_DELETE, 0);
  /* ENOENT: never added, or the kqueue was not inherited (fork). */
  return err && err != ENOENT ? kq_error(err) : 0;
}
#define KQ_EXT_SIGNAL TAXI__EXT_SIGNAL
#else
#define KQ_EXT_SIGNAL 0u
#define kq_signal_add NULL
#define kq_signal_del NULL
#endif

const taxi__readiness_ops_t taxi__backend_kqueue = {
    .name = "kqueue",
    .caps = KQ_CAP_ONESHOT | TAXI_CAP_MULTI_WAIT | KQ_CAP_EDGE |
            TAXI_CAP_LIVE_UPDATE,
    .max_handles = 0,
    .ext = TAXI__EXT_EVENT_ERROR | KQ_EXT_WAKEUP | KQ_EXT_SIGNAL,
    .open = kq_open,
    .close = kq_close,
    .add = kq_add,
    .modify = kq_modify,
    .del = kq_del,
    .wait = kq_wait,
    .wakeup_open = kq_wakeup_open,
    .wakeup_signal = kq_wakeup_signal,
    .signal_add = kq_signal_add,
    .signal_del = kq_signal_del,
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_kqueue_absent;
#endif /* TAXI_HAVE_KQUEUE */
