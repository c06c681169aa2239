/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/emulated.c - the Proactor over a Reactor: asynchronous
 * operations performed as non-blocking system calls when a readiness
 * backend reports their handle ready.  This is how the Proactor API runs
 * where the OS has no completion mechanism (the BSDs, macOS, old Linux),
 * and over any reactor backend: "emulated:poll", "emulated:select"; the
 * part after the colon is the reactor backend (none: the reactor's own
 * choice).
 *
 * submit tries the step at once and otherwise watches the handle; the
 * reactor's hooks, run inside wait, perform the step when the handle is
 * ready and list the completion; wait returns listed completions and runs
 * the reactor only when there are none.  Lock order: proactor lock -> this
 * backend's lock -> reactor lock.  How an operation goes, why watching is
 * lazy, the locking and the counters: docs/backends/emulated.md.
 */
#include "config.h"

#include "backends/completion.h"
#include "backends/nbio.h"
#include "core/common/alloc.h"
#include "core/common/handle_map.h"
#include "core/proactor/proactor_op.h"
#include "core/reactor/reactor_closing.h"
#include "core/reactor/reactor_interrupt.h"
#include "ports/port.h"
#include "taxi/backend.h"
#include "taxi/reactor.h"

#include <string.h>

typedef struct emu emu_t;

/* One attached handle. */
typedef struct emu_conn {
  taxi_handler_t h; /* registered with the reactor once needed */
  emu_t *e;
  taxi_handle_t fd;
  taxi_op_t *op[2];  /* the submitted op of each direction, if waiting */
  unsigned interest; /* what we want reported now (TAXI_EV_READ/WRITE) */
  unsigned reactor_interest; /* what the reactor's registration holds */
  bool registered;
  bool suspended;
  bool detached; /* forgotten; its close hook recycles it */
  struct emu_conn *next_free;
} emu_conn_t;

/* What this backend keeps in each record's backend room. */
typedef struct emu_op {
  taxi_op_t *next; /* in the list of completions */
  int64_t result;
  emu_conn_t *conn;
  unsigned dir;         /* 0 input, 1 output */
  bool connect_started; /* CONNECT: connect() said EINPROGRESS */
  bool listed;          /* its completion is listed, not yet reaped */
} emu_op_t;

_Static_assert(sizeof(emu_op_t) <= TAXI_OP_BACKEND_SIZE,
               "emu_op_t must fit the record's backend room");

struct emu {
  taxi__mutex_t lock;
  taxi_reactor_t *reactor;
  taxi__completion_counters_t *counters;
  bool live_update; /* interest changes are system calls */

  taxi__handle_map_t map; /* fd -> index in conns */
  emu_conn_t **conns;
  uint32_t nconns, conns_cap;
  uint32_t *free_idx; /* unused indices of conns */
  uint32_t nfree_idx;
  emu_conn_t *free_conns; /* recycled records */

  taxi_op_t *done_head, *done_tail; /* completions not yet reaped */
  bool in_wait;                     /* a thread runs the reactor */

  /* The reactor's counters at the last wait (read by the waiter only). */
  uint64_t seen_waits, seen_wakeups;
};

static emu_op_t *eop(taxi_op_t *op) { return taxi__op_backend(op); }

static void count(emu_t *e, uint64_t n) {
  atomic_fetch_add_explicit(&e->counters->syscalls, n, memory_order_relaxed);
}

/* ---- completions -------------------------------------------------------- */

/* List op's completion.  e->lock held. */
static void list_done(emu_t *e, taxi_op_t *op, int64_t result) {
  emu_op_t *o = eop(op);
  o->result = result;
  o->listed = true;
  o->next = NULL;
  if (e->done_tail)
    eop(e->done_tail)->next = op;
  else
    e->done_head = op;
  e->done_tail = op;
}

static size_t take_done(emu_t *e, taxi__completion_t *out, size_t max) {
  size_t n = 0;
  while (n < max && e->done_head) {
    taxi_op_t *op = e->done_head;
    emu_op_t *o = eop(op);
    e->done_head = o->next;
    if (!e->done_head) e->done_tail = NULL;
    o->listed = false;
    out[n].op = op;
    out[n].result = o->result;
    out[n].flags = 0;
    n++;
  }
  return n;
}

static void emu_wake(void *state, int all) {
  emu_t *e = state;
  (void)all; /* one thread waits at a time */
  /* No lock, nothing allocated: callable from a signal handler (by
   * taxi_proactor_stop).  Wake-ups coalesce in the reactor's channel. */
  (void)taxi__reactor_interrupt(e->reactor);
}

/* A completion listed from outside the waiting thread must wake it.
 * e->lock held. */
static void list_done_outside(emu_t *e, taxi_op_t *op, int64_t result) {
  bool was_empty = e->done_head == NULL;
  list_done(e, op, result);
  if (was_empty && e->in_wait) emu_wake(e, 0);
}

/* ---- interest ----------------------------------------------------------- */

/* Make the reactor report `want` for c.  e->lock held. */
static int set_interest(emu_t *e, emu_conn_t *c, unsigned want) {
  int rc = 0;
  unsigned calls = 0; /* reactor calls: one epoll_ctl/kevent each */
  if (want == c->interest) return 0;
  if (!c->registered) {
    rc = taxi__reactor_register_own(e->reactor, c->fd, &c->h, want);
    if (rc < 0) return rc;
    calls++;
    c->registered = true;
    c->suspended = false;
    c->reactor_interest = want;
  } else if (want == 0) {
    rc = taxi_reactor_suspend(e->reactor, &c->h);
    if (rc < 0) return rc;
    calls++;
    c->suspended = true;
  } else {
    if (want != c->reactor_interest) {
      rc = taxi_reactor_modify(e->reactor, &c->h, want);
      if (rc < 0) return rc;
      calls++;
      c->reactor_interest = want;
    }
    if (c->suspended) {
      rc = taxi_reactor_resume(e->reactor, &c->h);
      if (rc < 0) return rc;
      calls++;
      c->suspended = false;
    }
  }
  if (e->live_update) count(e, calls);
  c->interest = want;
  return 0;
}

static unsigned dir_bit(unsigned dir) {
  return dir == 0 ? TAXI_EV_READ : TAXI_EV_WRITE;
}

/* ---- performing a step -------------------------------------------------- */

/* Try op's step now.  Completed (or failed): list it, forget it, drop
 * output interest.  Would block: watch for what it needs.  e->lock held;
 * `outside`: not in the waiting thread. */
static void attempt(emu_t *e, emu_conn_t *c, taxi_op_t *op, bool outside) {
  emu_op_t *o = eop(op);
  int64_t r = taxi__nbio_step(op, o->connect_started, e->counters);
  int pending = 0;
  if (taxi__nbio_may_hide_error(op, o->connect_started, r) &&
      taxi_reactor_pending_error(e->reactor, &c->h, &pending) == 0 && pending)
    r = pending;
  if (op->kind == TAXI_OP_CONNECT && r == TAXI_EAGAIN)
    o->connect_started = true;
  if (r == TAXI_EAGAIN) {
    r = set_interest(e, c, c->interest | dir_bit(o->dir));
    if (r == 0) return;
  }
  c->op[o->dir] = NULL;
  if (o->dir == 1 && (c->interest & TAXI_EV_WRITE))
    set_interest(e, c, c->interest & ~TAXI_EV_WRITE);
  if (outside)
    list_done_outside(e, op, r);
  else
    list_done(e, op, r);
}

/* The reactor reports c ready for direction d.  e->lock held. */
static void ready(emu_t *e, emu_conn_t *c, unsigned d) {
  taxi_op_t *op = c->op[d];
  if (!op) {
    /* Nobody wants it (input left watched after a read): stop watching. */
    if (c->interest & dir_bit(d)) set_interest(e, c, c->interest & ~dir_bit(d));
    return;
  }
  attempt(e, c, op, false);
}

static int on_input(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  emu_conn_t *c = TAXI_CONTAINER_OF(h, emu_conn_t, h);
  emu_t *e = c->e;
  (void)fd;
  taxi__mutex_lock(&e->lock);
  if (!c->detached) {
    ready(e, c, 0);
    /* A hang-up or error with no output reported: the output hook is not
     * called, so a write waiting here must learn of it now. */
    if ((events & (TAXI_EV_HUP | TAXI_EV_ERR)) && !(events & TAXI_EV_WRITE) &&
        c->op[1])
      ready(e, c, 1);
  }
  taxi__mutex_unlock(&e->lock);
  return 0;
}

static int on_output(taxi_handler_t *h, taxi_handle_t fd, unsigned events) {
  emu_conn_t *c = TAXI_CONTAINER_OF(h, emu_conn_t, h);
  emu_t *e = c->e;
  (void)fd;
  (void)events;
  taxi__mutex_lock(&e->lock);
  if (!c->detached) ready(e, c, 1);
  taxi__mutex_unlock(&e->lock);
  return 0;
}

static void on_close(taxi_handler_t *h, taxi_handle_t fd) {
  emu_conn_t *c = TAXI_CONTAINER_OF(h, emu_conn_t, h);
  emu_t *e = c->e;
  (void)fd;
  taxi__mutex_lock(&e->lock);
  c->next_free = e->free_conns;
  e->free_conns = c;
  taxi__mutex_unlock(&e->lock);
}

static const taxi_handler_ops_t conn_ops = {
    .input = on_input, .output = on_output, .close = on_close};

/* ---- the handle table --------------------------------------------------- */

static emu_conn_t *lookup(emu_t *e, taxi_handle_t fd) {
  uint32_t i;
  if (taxi__handle_map_get(&e->map, fd, &i) < 0) return NULL;
  return e->conns[i];
}

static int index_alloc(emu_t *e, uint32_t *out) {
  if (e->nfree_idx) {
    *out = e->free_idx[--e->nfree_idx];
    return 0;
  }
  if (e->nconns == e->conns_cap) {
    uint32_t ncap = e->conns_cap ? e->conns_cap * 2 : 16;
    emu_conn_t **n = taxi__reallocarray(e->conns, ncap, sizeof *n);
    if (!n) return TAXI_ENOMEM;
    e->conns = n;
    uint32_t *f = taxi__reallocarray(e->free_idx, ncap, sizeof *f);
    if (!f) return TAXI_ENOMEM;
    e->free_idx = f;
    e->conns_cap = ncap;
  }
  *out = e->nconns++;
  return 0;
}

static int emu_attach(void *state, taxi_handle_t fd) {
  emu_t *e = state;
  int rc = taxi__set_nonblocking(fd);
  if (rc < 0) return rc;
  taxi__mutex_lock(&e->lock);
  uint32_t i;
  if (taxi__handle_map_get(&e->map, fd, &i) == 0) {
    taxi__mutex_unlock(&e->lock);
    return TAXI_EEXIST;
  }
  emu_conn_t *c = e->free_conns;
  if (c)
    e->free_conns = c->next_free;
  else
    c = taxi__calloc(1, sizeof *c);
  rc = c ? index_alloc(e, &i) : TAXI_ENOMEM;
  if (rc == 0) rc = taxi__handle_map_put(&e->map, fd, i);
  if (rc < 0) {
    if (c) {
      c->next_free = e->free_conns;
      e->free_conns = c;
    }
    taxi__mutex_unlock(&e->lock);
    return rc;
  }
  memset(c, 0, sizeof *c);
  taxi_handler_init(&c->h, &conn_ops);
  c->e = e;
  c->fd = fd;
  e->conns[i] = c;
  taxi__mutex_unlock(&e->lock);
  return 0;
}

static void emu_detach(void *state, taxi_handle_t fd) {
  emu_t *e = state;
  uint32_t i;
  taxi__mutex_lock(&e->lock);
  if (taxi__handle_map_get(&e->map, fd, &i) < 0) {
    taxi__mutex_unlock(&e->lock);
    return;
  }
  emu_conn_t *c = e->conns[i];
  taxi__handle_map_del(&e->map, fd);
  e->conns[i] = NULL;
  e->free_idx[e->nfree_idx++] = i;
  /* The core cancelled them first; be safe if it did not. */
  for (unsigned d = 0; d < 2; d++) {
    if (!c->op[d]) continue;
    list_done_outside(e, c->op[d], TAXI_ECANCELED);
    c->op[d] = NULL;
  }
  c->detached = true;
  bool registered = c->registered;
  if (!registered) {
    c->next_free = e->free_conns;
    e->free_conns = c;
  }
  taxi__mutex_unlock(&e->lock);
  /* Its close hook recycles it once no hook of it runs any more; the hook
   * takes e->lock, so it must not be held here. */
  if (registered) {
    taxi_reactor_remove(e->reactor, &c->h);
    if (e->live_update) count(e, 1);
  }
}

/* ---- the completion-backend operations ---------------------------------- */

static unsigned dir_of(const taxi_op_t *op) {
  switch (op->kind) {
    case TAXI_OP_ACCEPT:
    case TAXI_OP_READ:
    case TAXI_OP_READ_FILE:
    case TAXI_OP_RECVFROM:
      return 0;
    default:
      return 1;
  }
}

static int emu_submit(void *state, taxi_op_t *op) {
  emu_t *e = state;
  emu_op_t *o = eop(op);
  taxi__mutex_lock(&e->lock);
  emu_conn_t *c = lookup(e, op->handle);
  if (!c) {
    taxi__mutex_unlock(&e->lock);
    return TAXI_ENOENT;
  }
  memset(o, 0, sizeof *o);
  o->conn = c;
  o->dir = dir_of(op);
  if (op->kind == TAXI_OP_READ_FILE || op->kind == TAXI_OP_WRITE_FILE) {
    /* Files never wait for readiness. */
    list_done_outside(e, op, taxi__nbio_step(op, false, e->counters));
    taxi__mutex_unlock(&e->lock);
    return 0;
  }
  if (c->op[o->dir]) {
    taxi__mutex_unlock(&e->lock);
    return TAXI_EBUSY; /* the core submits one per direction */
  }
  c->op[o->dir] = op;
  /* Input already watched: the reactor reports it if it is there, and
   * trying now would most likely cost a system call for EAGAIN. */
  bool watched = o->dir == 0 && (c->interest & TAXI_EV_READ);
  if (!watched) attempt(e, c, op, true);
  taxi__mutex_unlock(&e->lock);
  return 0;
}

static int emu_cancel(void *state, taxi_op_t *op) {
  emu_t *e = state;
  emu_op_t *o = eop(op);
  int rc = TAXI_ENOENT;
  taxi__mutex_lock(&e->lock);
  emu_conn_t *c = o->conn;
  if (!o->listed && c && !c->detached && c->op[o->dir] == op) {
    c->op[o->dir] = NULL;
    /* Output interest is dropped now; input interest lazily. */
    if (o->dir == 1 && (c->interest & TAXI_EV_WRITE))
      set_interest(e, c, c->interest & ~TAXI_EV_WRITE);
    list_done_outside(e, op, TAXI_ECANCELED);
    rc = 0;
  }
  taxi__mutex_unlock(&e->lock);
  return rc;
}

/* Add what the reactor did since the last look to the counters. */
static void account_reactor(emu_t *e) {
  taxi_reactor_stats_t st;
  if (taxi_reactor_stats(e->reactor, &st) < 0) return;
  uint64_t waits = st.waits - e->seen_waits;
  uint64_t wakeups = st.wakeups - e->seen_wakeups;
  e->seen_waits = st.waits;
  e->seen_wakeups = st.wakeups;
  atomic_fetch_add_explicit(&e->counters->waits, waits, memory_order_relaxed);
  count(e, waits + wakeups);
}

static int emu_wait(void *state, taxi__completion_t *out, size_t max,
                    int timeout_ms) {
  emu_t *e = state;
  if (max == 0) return 0;
  taxi__mutex_lock(&e->lock);
  size_t n = take_done(e, out, max);
  if (n) {
    taxi__mutex_unlock(&e->lock);
    return (int)n;
  }
  e->in_wait = true;
  taxi__mutex_unlock(&e->lock);

  int rc = taxi_reactor_handle_events(e->reactor, timeout_ms);
  account_reactor(e);

  taxi__mutex_lock(&e->lock);
  e->in_wait = false;
  n = take_done(e, out, max);
  taxi__mutex_unlock(&e->lock);
  if (n) return (int)n;
  return rc < 0 && rc != TAXI_ESTOPPED ? rc : 0;
}

static int emu_open(void **state, const char *variant,
                    const taxi_proactor_options_t *opts,
                    taxi__completion_counters_t *counters) {
  (void)opts;
  emu_t *e = taxi__calloc(1, sizeof *e);
  if (!e) return TAXI_ENOMEM;
  int rc = taxi__mutex_init(&e->lock);
  if (rc < 0) {
    taxi__free(e);
    return rc;
  }
  taxi_reactor_options_t ro = TAXI_REACTOR_OPTIONS_INIT;
  ro.backend = variant;
  rc = taxi_reactor_create(&e->reactor, &ro);
  if (rc < 0) {
    taxi__mutex_destroy(&e->lock);
    taxi__free(e);
    return rc == TAXI_ENOMEM ? rc : TAXI_ENOBACKEND;
  }
  taxi__reactor_pass_wait_errors(e->reactor);
  e->counters = counters;
  unsigned caps = 0;
  (void)taxi_reactor_caps(e->reactor, &caps); /* the reactor was just made */
  e->live_update = (caps & TAXI_CAP_LIVE_UPDATE) != 0;
  taxi__handle_map_init(&e->map);
  *state = e;
  return 0;
}

static void emu_close(void *state) {
  emu_t *e = state;
  /* Handles the core left attached: their close hooks recycle them. */
  taxi__mutex_lock(&e->lock);
  for (uint32_t i = 0; i < e->nconns; i++) {
    emu_conn_t *c = e->conns[i];
    if (c && !c->registered) {
      c->next_free = e->free_conns;
      e->free_conns = c;
      e->conns[i] = NULL;
    }
  }
  taxi__mutex_unlock(&e->lock);
  taxi_reactor_destroy(e->reactor); /* runs the remaining close hooks */
  while (e->free_conns) {
    emu_conn_t *c = e->free_conns;
    e->free_conns = c->next_free;
    taxi__free(c);
  }
  taxi__handle_map_destroy(&e->map);
  taxi__free(e->conns);
  taxi__free(e->free_idx);
  taxi__mutex_destroy(&e->lock);
  taxi__free(e);
}

static const char *emu_reactor_backend(void *state) {
  const emu_t *e = state;
  return taxi_reactor_backend(e->reactor);
}

const taxi__completion_ops_t taxi__completion_emulated = {
    .name = "emulated",
    .caps = 0,
    .open = emu_open,
    .reactor_backend = emu_reactor_backend,
    .close = emu_close,
    .attach = emu_attach,
    .detach = emu_detach,
    .submit = emu_submit,
    .cancel = emu_cancel,
    .wait = emu_wait,
    .wake = emu_wake,
};
