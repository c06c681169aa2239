/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/apr_pollset.c - a readiness backend over APR's apr_pollset_*,
 * one table per APR method: "apr" (APR_POLLSET_DEFAULT), "apr:epoll",
 * "apr:poll", "apr:select", "apr:kqueue", "apr:port".  A named method is
 * created with APR_POLLSET_NODEFAULT, so one this APR lacks fails to open.
 *
 * Only a thread that holds this backend's lock while nobody is inside
 * apr_pollset_poll() touches the APR set: add, modify and del interrupt a
 * wait in progress (APR_POLLSET_WAKEABLE) and make the change themselves
 * before they return.  No one-shot, one waiter, no live update.  Why
 * those capabilities, the sockets APR needs, and initialising APR:
 * docs/backends/apr_pollset.md.
 */
#include "config.h"

#if TAXI_HAVE_APR

#include "readiness.h"

#include "core/common/alloc.h"
#include "ports/port.h"

#include <apr_general.h>
#include <apr_poll.h>
#include <apr_pools.h>
#include <apr_portable.h>

#include <errno.h>
#include <string.h>
#include <sys/select.h>

/* Capacity of a new APR set; doubled whenever it fills up. */
#define APS_SET_MIN 64u

/* slot_t.state */
#define SLOT_UNKNOWN 0u
#define SLOT_REGISTERED 1u

/* What APR watches for one descriptor number.  Allocated from the
 * backend's pool at the number's first registration and kept until close,
 * so that APR may hold a pointer to `pfd` and a poll result's client_data
 * (this entry) stays valid whatever other threads do meanwhile. */
typedef struct aps_entry {
  apr_pollfd_t pfd;       /* desc.s = sock, client_data = this entry */
  apr_socket_t *sock;     /* wraps the descriptor; no cleanup, never closed */
  uint64_t applied_token; /* the token given with the registration in APR */
  apr_int16_t applied;    /* its reqevents; 0 while not in the APR set */
} aps_entry_t;

/* What the core wants for one descriptor number. */
typedef struct slot {
  aps_entry_t *entry; /* NULL until the number is first registered */
  uint64_t token;
  unsigned events;
  unsigned char state; /* SLOT_* */
} slot_t;

typedef struct aps_state {
  const struct aps_method *method;
  taxi__mutex_t lock;
  taxi__cond_t left; /* signalled when a wait leaves apr_pollset_poll() */

  /* Under `lock`. */
  apr_pool_t *pool;     /* entries and their sockets */
  apr_pool_t *set_pool; /* the APR set; replaced when the set grows */
  apr_pollset_t *set;
  apr_uint32_t set_size; /* capacity the set was created with */
  apr_uint32_t in_set;   /* entries in it */
  slot_t *slots;         /* [slot_cap], indexed by descriptor */
  size_t slot_cap;
  bool polling; /* a thread is inside apr_pollset_poll(), or about to be */

  /* The waiting thread's own. */
  size_t resume; /* where copying the next poll's results starts */
} aps_state_t;

typedef struct aps_method {
  apr_pollset_method_e method;
  apr_int32_t flags;
} aps_method_t;

static const aps_method_t method_default = {APR_POLLSET_DEFAULT, 0};
static const aps_method_t method_epoll = {APR_POLLSET_EPOLL,
                                          APR_POLLSET_NODEFAULT};
static const aps_method_t method_poll = {APR_POLLSET_POLL,
                                         APR_POLLSET_NODEFAULT};
static const aps_method_t method_select = {APR_POLLSET_SELECT,
                                           APR_POLLSET_NODEFAULT};
static const aps_method_t method_kqueue = {APR_POLLSET_KQUEUE,
                                           APR_POLLSET_NODEFAULT};
static const aps_method_t method_port = {APR_POLLSET_PORT,
                                         APR_POLLSET_NODEFAULT};

/* ---- APR's own initialisation --------------------------------------- */

static taxi__mutex_t aps_init_lock = TAXI__MUTEX_INITIALIZER;

static apr_status_t aps_up(void) {
  taxi__mutex_lock(&aps_init_lock);
  apr_status_t st = apr_initialize();
  taxi__mutex_unlock(&aps_init_lock);
  return st;
}

static void aps_down(void) {
  taxi__mutex_lock(&aps_init_lock);
  apr_terminate();
  taxi__mutex_unlock(&aps_init_lock);
}

/* ---- errors and masks ----------------------------------------------- */

/* An apr_status_t from the pollset calls as a TAXI_E* code.  APR's codes
 * for system errors are errno values on POSIX (APR_FROM_OS_ERROR is the
 * identity there), which are recorded for taxi_last_os_error(). */
static int aps_error(apr_status_t st) {
  if (st == APR_SUCCESS) return 0;
  if (APR_STATUS_IS_ENOTIMPL(st)) return TAXI_ENOTSUP;
  if (APR_STATUS_IS_ENOMEM(st)) return TAXI_ENOMEM;
  if (APR_STATUS_IS_EBADF(st)) return TAXI_EBADF;
  if (APR_STATUS_IS_EEXIST(st)) return TAXI_EEXIST;
  if (APR_STATUS_IS_NOTFOUND(st) || APR_STATUS_IS_ENOENT(st))
    return TAXI_ENOENT;
  if (APR_STATUS_IS_EINVAL(st)) return TAXI_EINVAL;
  if (st == EPERM) {
    /* epoll_ctl(2) refusing a regular file or a directory. */
    taxi__set_os_error(EPERM);
    return TAXI_ENOTSUP;
  }
  if (st < APR_OS_START_ERROR) return taxi__error_from_os((int)st);
  return TAXI_ESYS;
}

static apr_int16_t aps_mask(unsigned events) {
  apr_int16_t mask = 0;
  if (events & TAXI_EV_READ) mask |= APR_POLLIN;
  if (events & TAXI_EV_WRITE) mask |= APR_POLLOUT;
  if (events & TAXI_EV_EXCEPT) mask |= APR_POLLPRI;
  return mask;
}

static unsigned aps_events_out(apr_int16_t rtn) {
  unsigned ev = 0;
  if (rtn & APR_POLLIN) ev |= TAXI_EV_READ;
  if (rtn & APR_POLLOUT) ev |= TAXI_EV_WRITE;
  if (rtn & APR_POLLPRI) ev |= TAXI_EV_EXCEPT;
  if (rtn & APR_POLLHUP) ev |= TAXI_EV_HUP;
  /* APR_POLLNVAL: the descriptor was closed while watched (the core
   * checks it before it believes so). */
  if (rtn & (APR_POLLERR | APR_POLLNVAL)) ev |= TAXI_EV_ERR;
  if (rtn & APR_POLLNVAL) ev |= TAXI__EV_CLOSED;
  return ev;
}

/* ---- the APR set ---------------------------------------------------- */

static apr_status_t set_create(aps_state_t *s, apr_uint32_t size,
                               apr_pool_t **pool, apr_pollset_t **set) {
  apr_status_t st = apr_pool_create(pool, s->pool);
  if (st != APR_SUCCESS) return st;
  st = apr_pollset_create_ex(
      set, size, *pool,
      s->method->flags | APR_POLLSET_NOCOPY | APR_POLLSET_WAKEABLE,
      s->method->method);
  if (st != APR_SUCCESS) {
    apr_pool_destroy(*pool);
    *pool = NULL;
  }
  return st;
}

/* Replace the full set by one twice as large holding the same entries.
 * Under the lock, with nobody polling. */
static apr_status_t set_grow(aps_state_t *s) {
  apr_pool_t *pool;
  apr_pollset_t *set;
  apr_uint32_t size = s->set_size * 2;
  if (size <= s->set_size) return APR_ENOMEM;
  apr_status_t st = set_create(s, size, &pool, &set);
  if (st != APR_SUCCESS) return st;
  for (size_t fd = 0; fd < s->slot_cap; fd++) {
    aps_entry_t *e = s->slots[fd].entry;
    if (!e || !e->applied) continue;
    st = apr_pollset_add(set, &e->pfd);
    if (st != APR_SUCCESS) {
      apr_pool_destroy(pool);
      return st;
    }
  }
  apr_pool_destroy(s->set_pool); /* destroys the old set with it */
  s->set_pool = pool;
  s->set = set;
  s->set_size = size;
  return APR_SUCCESS;
}

/* Make the APR set watch what slot fd asks for.  Under the lock, with
 * nobody polling.  On failure the entry is left out of the set. */
static apr_status_t apply(aps_state_t *s, int fd) {
  slot_t *sl = &s->slots[fd];
  aps_entry_t *e = sl->entry;
  apr_int16_t want = sl->state == SLOT_REGISTERED ? aps_mask(sl->events) : 0;
  if (!e) return APR_SUCCESS;
  if (e->applied && e->applied == want && e->applied_token == sl->token)
    return APR_SUCCESS;
  if (e->applied) {
    /* A descriptor the application closed first is gone from a kernel set
     * already (APR_NOTFOUND): nothing to undo. */
    (void)apr_pollset_remove(s->set, &e->pfd);
    e->applied = 0;
    s->in_set--;
  }
  if (!want) return APR_SUCCESS;
  if (s->in_set == s->set_size) {
    apr_status_t st = set_grow(s);
    if (st != APR_SUCCESS) return st;
  }
  e->pfd.reqevents = want;
  e->pfd.rtnevents = 0;
  apr_status_t st = apr_pollset_add(s->set, &e->pfd);
  if (st != APR_SUCCESS) return st;
  e->applied = want;
  e->applied_token = sl->token;
  s->in_set++;
  return APR_SUCCESS;
}

/* ---- the table's functions ------------------------------------------ */

static int aps_open_method(void **state, const aps_method_t *m) {
  aps_state_t *s;
  apr_status_t st = aps_up();
  int rc;
  if (st != APR_SUCCESS) return aps_error(st);
  s = taxi__calloc(1, sizeof *s);
  if (!s) {
    aps_down();
    return TAXI_ENOMEM;
  }
  s->method = m;
  rc = taxi__mutex_init(&s->lock);
  if (rc < 0) goto fail_free;
  rc = taxi__cond_init(&s->left);
  if (rc < 0) {
    taxi__mutex_destroy(&s->lock);
    goto fail_free;
  }
  st = apr_pool_create(&s->pool, NULL);
  if (st != APR_SUCCESS) {
    rc = aps_error(st);
    goto fail_lock;
  }
  /* APR's select method refuses a size above FD_SETSIZE, and a wakeable
   * set holds one descriptor more (its wake-up pipe); it never grows. */
  s->set_size = m->method == APR_POLLSET_SELECT ? FD_SETSIZE - 1 : APS_SET_MIN;
  st = set_create(s, s->set_size, &s->set_pool, &s->set);
  if (st != APR_SUCCESS) {
    /* APR_ENOTIMPL: this APR has no such method here. */
    rc = APR_STATUS_IS_ENOTIMPL(st) ? TAXI_ENOTSUP : aps_error(st);
    goto fail_pool;
  }
  *state = s;
  return 0;

fail_pool:
  apr_pool_destroy(s->pool);
fail_lock:
  taxi__cond_destroy(&s->left);
  taxi__mutex_destroy(&s->lock);
fail_free:
  taxi__free(s);
  aps_down();
  return rc;
}

static int aps_open_default(void **state) {
  return aps_open_method(state, &method_default);
}
static int aps_open_epoll(void **state) {
  return aps_open_method(state, &method_epoll);
}
static int aps_open_poll(void **state) {
  return aps_open_method(state, &method_poll);
}
static int aps_open_select(void **state) {
  return aps_open_method(state, &method_select);
}
static int aps_open_kqueue(void **state) {
  return aps_open_method(state, &method_kqueue);
}
static int aps_open_port(void **state) {
  return aps_open_method(state, &method_port);
}

/* Destroying the pool destroys the set (closing an epoll or kqueue
 * descriptor of our own, which after fork(2) deregisters nothing in the
 * parent) and the entries; the sockets in them close nothing. */
static void aps_close(void *state) {
  aps_state_t *s = state;
  if (!s) return;
  apr_pool_destroy(s->pool);
  taxi__free(s->slots);
  taxi__cond_destroy(&s->left);
  taxi__mutex_destroy(&s->lock);
  taxi__free(s);
  aps_down();
}

/* Room for descriptor fd in slots. */
static int slots_reserve(aps_state_t *s, taxi_handle_t fd) {
  size_t need = (size_t)fd + 1;
  size_t cap = s->slot_cap ? s->slot_cap : APS_SET_MIN;
  slot_t *slots;
  if (need <= s->slot_cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / sizeof *slots) return TAXI_ENOMEM;
    cap *= 2;
  }
  slots = taxi__reallocarray(s->slots, cap, sizeof *slots);
  if (!slots) return TAXI_ENOMEM;
  memset(slots + s->slot_cap, 0, (cap - s->slot_cap) * sizeof *slots);
  s->slots = slots;
  s->slot_cap = cap;
  return 0;
}

static slot_t *slot_of(aps_state_t *s, taxi_handle_t fd) {
  return fd >= 0 && (size_t)fd < s->slot_cap ? &s->slots[fd] : NULL;
}

/* The entry for descriptor number fd, made at its first registration. */
static int entry_get(aps_state_t *s, taxi_handle_t fd, aps_entry_t **out) {
  slot_t *sl = &s->slots[fd];
  if (!sl->entry) {
    aps_entry_t *e = apr_pcalloc(s->pool, sizeof *e);
    apr_os_sock_t os = fd;
    if (!e) return TAXI_ENOMEM;
    if (apr_os_sock_put(&e->sock, &os, s->pool) != APR_SUCCESS)
      return TAXI_ENOMEM;
    e->pfd.p = s->pool;
    e->pfd.desc_type = APR_POLL_SOCKET;
    e->pfd.desc.s = e->sock;
    e->pfd.client_data = e;
    sl->entry = e;
  }
  *out = sl->entry;
  return 0;
}

/* Make the APR set match slot fd now.  Under the lock; a wait in progress
 * is interrupted first, and the change made once it has left the poll. */
static int commit(aps_state_t *s, taxi_handle_t fd) {
  if (s->polling) {
    /* Coalesced by APR: one byte in its pipe however many ask. */
    (void)apr_pollset_wakeup(s->set);
    while (s->polling) taxi__cond_wait(&s->left, &s->lock);
  }
  return aps_error(apply(s, fd));
}

static int check_events(aps_state_t *s, taxi_handle_t h, unsigned events) {
  if (h < 0) return TAXI_EBADF;
  if (events & ~TAXI_EV_INTEREST) return TAXI_EINVAL;
  if (s->method->method == APR_POLLSET_SELECT && h >= FD_SETSIZE)
    return TAXI_ETOOMANY;
  return 0;
}

static int aps_add(void *state, taxi_handle_t h, uint64_t token,
                   unsigned events, unsigned flags) {
  aps_state_t *s = state;
  aps_entry_t *e;
  slot_t *sl;
  /* No one-shot arming here (no TAXI_CAP_ONESHOT). */
  int rc = check_events(s, h, events);
  if (rc < 0) return rc;
  /* A change applied later could not report a closed descriptor; one the
   * caller found open (TAXI__ARM_OPEN) is. */
  if (!(flags & TAXI__ARM_OPEN)) rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  sl = slot_of(s, h);
  if (sl && sl->state != SLOT_UNKNOWN) {
    rc = TAXI_EEXIST;
  } else if ((rc = slots_reserve(s, h)) == 0 &&
             (rc = entry_get(s, h, &e)) == 0) {
    sl = &s->slots[h];
    sl->state = SLOT_REGISTERED;
    sl->token = token;
    sl->events = events;
    rc = commit(s, h);
    if (rc < 0) sl->state = SLOT_UNKNOWN;
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int aps_modify(void *state, taxi_handle_t h, uint64_t token,
                      unsigned events, unsigned flags) {
  aps_state_t *s = state;
  slot_t *sl;
  int rc = check_events(s, h, events);
  (void)flags;
  if (rc < 0) return rc;
  taxi__mutex_lock(&s->lock);
  sl = slot_of(s, h);
  if (!sl || sl->state == SLOT_UNKNOWN) {
    rc = TAXI_ENOENT;
  } else {
    sl->token = token;
    sl->events = events;
    rc = commit(s, h);
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

static int aps_del(void *state, taxi_handle_t h) {
  aps_state_t *s = state;
  slot_t *sl;
  int rc = 0;
  taxi__mutex_lock(&s->lock);
  sl = slot_of(s, h);
  if (!sl || sl->state == SLOT_UNKNOWN) {
    rc = TAXI_ENOENT;
  } else {
    sl->state = SLOT_UNKNOWN;
    /* Removing cannot fail in a way worth reporting: a handle closed
     * first has left the kernel's set by itself. */
    (void)commit(s, h);
  }
  taxi__mutex_unlock(&s->lock);
  return rc;
}

/* The poll failed with EBADF (APR's select method, as select(2) does): a
 * watched descriptor was closed by the application before it was
 * deleted.  Report those closed, as poll's POLLNVAL is, so the core can
 * remove their handlers; until then each poll fails the same way.  None
 * found: the culprit was deleted (or its number opened again) meanwhile,
 * and the next poll sees the set as it is now.  Under the lock. */
static size_t aps_report_closed(aps_state_t *s, taxi__ready_t *out,
                                size_t max) {
  size_t k = 0;
  for (size_t fd = 0; fd < s->slot_cap && k < max; fd++) {
    const aps_entry_t *e = s->slots[fd].entry;
    if (!e || !e->applied || taxi__handle_check((taxi_handle_t)fd) == 0)
      continue;
    out[k].token = e->applied_token;
    out[k].events = TAXI_EV_ERR | TAXI__EV_CLOSED;
    k++;
  }
  return k;
}

static int aps_wait(void *state, taxi__ready_t *out, size_t max,
                    int timeout_ms) {
  aps_state_t *s = state;
  const apr_pollfd_t *res = NULL;
  apr_int32_t num = 0;
  apr_interval_time_t timeout;
  apr_status_t st;
  size_t k = 0;
  if (!out || max == 0) return TAXI_EINVAL;

  taxi__mutex_lock(&s->lock);
  s->polling = true;
  taxi__mutex_unlock(&s->lock);

  timeout = timeout_ms < 0 ? -1 : (apr_interval_time_t)timeout_ms * 1000;
  /* APR_EINTR also when apr_pollset_wakeup() interrupted it. */
  st = apr_pollset_poll(s->set, timeout, &num, &res);

  /* The results are read under the lock and before `polling` is cleared:
   * until then no other thread touches an entry or the APR set. */
  taxi__mutex_lock(&s->lock);
  if (st == APR_SUCCESS) {
    /* Results beyond `max` are dropped (the set is level-triggered: they
     * are reported again); copying starts where the last cut-off stopped,
     * so handles late in APR's array are not starved. */
    size_t n = num > 0 ? (size_t)num : 0;
    size_t start = n && s->resume < n ? s->resume : 0;
    for (size_t step = 0; step < n && k < max; step++) {
      const apr_pollfd_t *r = &res[(start + step) % n];
      const aps_entry_t *e = r->client_data;
      out[k].token = e->applied_token;
      out[k].events = aps_events_out(r->rtnevents);
      k++;
      if (k == max) s->resume = (start + step + 1) % n;
    }
  } else if (APR_STATUS_IS_EBADF(st)) {
    k = aps_report_closed(s, out, max);
  }
  s->polling = false;
  taxi__cond_broadcast(&s->left);
  taxi__mutex_unlock(&s->lock);

  if (st == APR_SUCCESS || APR_STATUS_IS_TIMEUP(st) ||
      APR_STATUS_IS_EINTR(st) || APR_STATUS_IS_EAGAIN(st) ||
      APR_STATUS_IS_EBADF(st) || k)
    return (int)k;
  return aps_error(st);
}

#define APS_BACKEND(sym, label, opener, flags, limit) \
  const taxi__readiness_ops_t sym = {                 \
      .name = label,                                  \
      .caps = flags,                                  \
      .max_handles = limit,                           \
      .open = opener,                                 \
      .close = aps_close,                             \
      .add = aps_add,                                 \
      .modify = aps_modify,                           \
      .del = aps_del,                                 \
      .wait = aps_wait,                               \
  }

APS_BACKEND(taxi__backend_apr, "apr", aps_open_default, 0, 0);
APS_BACKEND(taxi__backend_apr_epoll, "apr:epoll", aps_open_epoll,
            TAXI_CAP_EXCEPT, 0);
APS_BACKEND(taxi__backend_apr_kqueue, "apr:kqueue", aps_open_kqueue, 0, 0);
APS_BACKEND(taxi__backend_apr_port, "apr:port", aps_open_port, 0, 0);
APS_BACKEND(taxi__backend_apr_poll, "apr:poll", aps_open_poll, TAXI_CAP_EXCEPT,
            0);
APS_BACKEND(taxi__backend_apr_select, "apr:select", aps_open_select, 0,
            FD_SETSIZE);

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__backend_apr_absent;
#endif /* TAXI_HAVE_APR */
