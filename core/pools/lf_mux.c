/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_mux.c - the multiplexed connection of taxi/lf_bound.h: replies
 * demultiplexed by id and handed to the thread that expects each (through
 * the table of core/pools/lf_bound.c, which it embeds).
 *
 * Everything shared lives under the pool's lock (core/pools/lf_bound.h): the
 * table of expected ids, the write lock's owner, the connection's error.
 * The read buffer is touched only by the input hook, which the reactor
 * never runs in two threads at once for one handle.  Reactor calls are
 * made without the pool's lock (it is the reactor's own).
 *
 * Which thread is in which of the connection's roles is kept per thread
 * (a list of the roles it holds, on its stack): that is how a call that
 * would wait for its own thread is told, and refused, cheaply.
 */
#include "config.h"

#include "taxi/lf_bound.h"
#include "taxi/error.h"
#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/pools/lf_bound.h"
#include "core/common/options.h"
#include "core/reactor/reactor_closing.h"
#include "core/common/time_math.h"
#include "ports/sock.h"

#include <limits.h>
#include <string.h>

struct taxi_lf_mux {
  taxi_handler_t h;
  taxi_lf_pool_t *pool;
  taxi_reactor_t *r;
  taxi_handle_t handle;
  taxi__mutex_t *lock; /* the pool's */
  taxi_lf_mux_options_t o;
  /* Under the lock.  The table's error is the connection's: what closed
   * it; its users are the awaits and sends in progress, and its `change`
   * is broadcast when the write lock is freed or the handle closed. */
  taxi_lf_bound_t b;
  bool closed;        /* its close hook ran */
  bool sending;       /* a sender holds the write lock */
  bool writable;      /* the output hook saw room to write */
  bool in_send;       /* a sender is in a send call on the handle */
  bool handle_closed; /* the handle was closed (by the close hook or it) */
  void *send_waiter;  /* the holder, while it waits for room */
  /* The input hook's alone. */
  char *rbuf;
  size_t rlen;
};

/* A role a thread holds on a connection: reading it, or holding its write
 * lock.  A list on the thread's stack. */
typedef struct role {
  const taxi_lf_mux_t *m;
  struct role *prev;
} role_t;

static _Thread_local role_t *reading, *writing;

/* The parse hook (or the unknown one) of m calls `fn`, which would wait
 * for the reads that only this thread makes. */
static int refuse_reading(const char *fn) {
  return taxi__refuse(TAXI_EBUSY,
                      "%s: m: called from a hook of this connection's reader "
                      "(parse, unknown), which reads for every waiter",
                      fn);
}

static bool holds(const role_t *list, const taxi_lf_mux_t *m) {
  for (; list; list = list->prev)
    if (list->m == m) return true;
  return false;
}

/* Close the connection's state with `code`: every record is finished with
 * it and every waiter woken.  The caller removes the handle. */
static void fail_locked(taxi_lf_mux_t *m, int code) {
  taxi__bound_fail_locked(&m->b, code);
  taxi__lf_kick_locked(m->pool, m->send_waiter);
}

static void fail(taxi_lf_mux_t *m, int code) {
  taxi__mutex_lock(m->lock);
  fail_locked(m, code);
  taxi__mutex_unlock(m->lock);
  taxi_reactor_remove(m->r, &m->h); /* TAXI_ENOENT if removed already */
}

/* ---- the handle's hooks -------------------------------------------------- */

/* One frame: to the record expecting its id, or to the unknown-id hook. */
static void deliver(taxi_lf_mux_t *m, const taxi_lf_frame_t *f,
                    const char *frame) {
  const char *body = frame + f->body;
  if (taxi__bound_deliver(&m->b, f->id, body, f->body_len) == TAXI_ENOENT)
    m->o.unknown(m->o.arg, f->id, body, f->body_len);
}

/* Cut the bytes read into frames and deliver them.  0, or the error that
 * closes the connection. */
static int parse_all(taxi_lf_mux_t *m) {
  size_t at = 0;
  int rc = 0;
  while (at < m->rlen) {
    taxi_lf_frame_t f;
    memset(&f, 0, sizeof f);
    size_t left = m->rlen - at;
    rc = m->o.parse(m->o.arg, m->rbuf + at, left, &f);
    if (rc <= 0) break;
    if (f.size == 0 || f.size > left || f.body > f.size ||
        f.body_len > f.size - f.body) {
      rc = TAXI_EINVAL;
      break;
    }
    deliver(m, &f, m->rbuf + at);
    at += f.size;
    rc = 0;
  }
  if (rc > 0) rc = 0;
  if (at) {
    memmove(m->rbuf, m->rbuf + at, m->rlen - at);
    m->rlen -= at;
  }
  if (rc == 0 && m->rlen == m->o.read_buffer) rc = TAXI_EMSGSIZE;
  return rc;
}

static int mux_input(taxi_handler_t *h, taxi_handle_t handle, unsigned ev) {
  taxi_lf_mux_t *m = TAXI_CONTAINER_OF(h, taxi_lf_mux_t, h);
  (void)ev;
  role_t me = {m, reading};
  reading = &me;
  int rc = 0;
  /* A bounded number of reads per event, so that a connection that never
   * runs dry does not keep its thread from the pool; the handle is
   * re-armed and reports the rest. */
  for (int reads = 0; reads < 16; reads++) {
    int64_t n =
        taxi__sock_recv(handle, m->rbuf + m->rlen, m->o.read_buffer - m->rlen);
    if (n == TAXI_EAGAIN) break;
    if (n == 0) rc = TAXI_EEOF;
    if (n <= 0) {
      if (n < 0) rc = (int)n;
      break;
    }
    m->rlen += (size_t)n;
    rc = parse_all(m);
    if (rc < 0) break;
  }
  reading = me.prev;
  if (rc == 0) return 0;
  taxi__mutex_lock(m->lock);
  fail_locked(m, rc);
  taxi__mutex_unlock(m->lock);
  return -1; /* the reactor removes the handler */
}

/* Room to write: tell the sender waiting for it. */
static int mux_output(taxi_handler_t *h, taxi_handle_t handle, unsigned ev) {
  taxi_lf_mux_t *m = TAXI_CONTAINER_OF(h, taxi_lf_mux_t, h);
  (void)handle;
  (void)ev;
  /* Watch for room no more until a sender asks again, so that a
   * writable socket does not keep the pool busy. */
  taxi_reactor_modify(m->r, &m->h, TAXI_EV_READ);
  taxi__mutex_lock(m->lock);
  m->writable = true;
  taxi__lf_kick_locked(m->pool, m->send_waiter);
  taxi__mutex_unlock(m->lock);
  return 0;
}

static void mux_error(taxi_handler_t *h, taxi_handle_t handle, int code) {
  taxi_lf_mux_t *m = TAXI_CONTAINER_OF(h, taxi_lf_mux_t, h);
  (void)handle;
  taxi__mutex_lock(m->lock);
  fail_locked(m, code);
  taxi__mutex_unlock(m->lock);
}

/* Close the handle unless a sender is in a call on it: a descriptor
 * closed under it could be reused by then for something else.  That
 * sender closes it when its call returns.  The lock held. */
static void close_handle_locked(taxi_lf_mux_t *m) {
  if (!m->closed || m->in_send || m->handle_closed) return;
  m->handle_closed = true;
  taxi__close(m->handle);
}

static void mux_close(taxi_handler_t *h, taxi_handle_t handle) {
  taxi_lf_mux_t *m = TAXI_CONTAINER_OF(h, taxi_lf_mux_t, h);
  (void)handle;
  taxi__mutex_lock(m->lock);
  fail_locked(m, TAXI_ECONNRESET); /* removed from outside: nobody waits */
  m->closed = true;
  close_handle_locked(m);
  taxi__cond_broadcast(&m->b.change);
  taxi__mutex_unlock(m->lock);
}

static const taxi_handler_ops_t mux_ops = {.input = mux_input,
                                           .output = mux_output,
                                           .error = mux_error,
                                           .close = mux_close};

/* ---- the public calls ---------------------------------------------------- */

void taxi_lf_mux_options_init(taxi_lf_mux_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

int taxi_lf_mux_create(taxi_lf_mux_t **out, taxi_lf_pool_t *p,
                       taxi_reactor_t *r, taxi_handle_t handle,
                       const taxi_lf_mux_options_t *opts) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_lf_mux_create: out: NULL");
  *out = NULL;
  if (!p || !r)
    return taxi__refuse(TAXI_EINVAL, "taxi_lf_mux_create: %s: NULL",
                        !p ? "p" : "r");
  taxi_lf_mux_options_t o;
  taxi_lf_mux_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_lf_mux_create: options",
                         "taxi_lf_mux_options_init") < 0)
    return TAXI_EINVAL;
  if (!o.parse || !o.unknown)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_mux_create: options.%s: NULL, and required",
                        !o.parse ? "parse" : "unknown");
  /* The pool's own reactor: the pool's lock is then the reactor's. */
  if (taxi__lf_source_self(p) != (void *)r)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_lf_mux_create: r: not the reactor pool p "
                        "dispatches (or p is destroyed)");
  if (!o.read_buffer) o.read_buffer = 64 * 1024;

  taxi_lf_mux_t *m = taxi__calloc(1, sizeof *m);
  if (!m) return TAXI_ENOMEM;
  int rc = taxi__bound_init(&m->b, p, o.buckets, "taxi_lf_mux_create");
  if (rc < 0) {
    taxi__free(m);
    return rc;
  }
  m->rbuf = taxi__malloc(o.read_buffer);
  if (!m->rbuf) {
    rc = TAXI_ENOMEM;
    goto fail;
  }
  m->pool = p;
  m->r = r;
  m->handle = handle;
  m->lock = taxi__lf_lock(p);
  m->o = o;
  taxi_handler_init(&m->h, &mux_ops);
  rc = taxi__reactor_register_own(r, handle, &m->h, TAXI_EV_READ);
  if (rc == 0) {
    *out = m;
    return 0;
  }
fail:
  taxi__free(m->rbuf);
  taxi__bound_fini(&m->b);
  taxi__free(m);
  return rc;
}

int taxi_lf_mux_expect(taxi_lf_mux_t *m, taxi_lf_expect_t *e) {
  return m && e ? taxi__bound_expect(&m->b, e, "taxi_lf_mux_expect")
                : TAXI_EINVAL;
}

int taxi_lf_mux_await(taxi_lf_mux_t *m, taxi_lf_expect_t *e, int timeout_ms) {
  if (!m || !e) return TAXI_EINVAL;
  if (holds(reading, m)) return refuse_reading("taxi_lf_mux_await");
  return taxi__bound_await(&m->b, e, timeout_ms, "taxi_lf_mux_await");
}

int taxi_lf_mux_forget(taxi_lf_mux_t *m, taxi_lf_expect_t *e) {
  return m && e ? taxi__bound_forget(&m->b, e, "taxi_lf_mux_forget")
                : TAXI_EINVAL;
}

int taxi_lf_mux_error(taxi_lf_mux_t *m) {
  if (!m) return TAXI_EINVAL;
  taxi__mutex_lock(m->lock);
  int rc = m->b.error;
  taxi__mutex_unlock(m->lock);
  return rc;
}

static bool room_or_closed(void *arg) {
  const taxi_lf_mux_t *m = arg;
  return m->writable || m->b.error;
}

/* Write all of data while holding the write lock; *sent says how much
 * went.  0 or an error; the lock held on entry and on return. */
static int send_all_locked(taxi_lf_mux_t *m, const char *data, size_t len,
                           taxi_time_t deadline, size_t *sent) {
  while (*sent < len) {
    if (m->b.error) return m->b.error;
    /* A room reported before this attempt says nothing about after it. */
    m->writable = false;
    m->in_send = true;
    taxi__mutex_unlock(m->lock);
    taxi_buf_t b = {(void *)(data + *sent), len - *sent};
    int64_t n = taxi__sock_sendv(m->handle, &b, 1);
    int rc = 0;
    if (n == TAXI_EAGAIN)
      rc = taxi_reactor_modify(m->r, &m->h, TAXI_EV_READ | TAXI_EV_WRITE);
    taxi__mutex_lock(m->lock);
    m->in_send = false;
    close_handle_locked(m); /* closed meanwhile */
    if (n > 0) {
      *sent += (size_t)n;
      continue;
    }
    if (n != TAXI_EAGAIN) return n == 0 ? TAXI_EPIPE : (int)n;
    if (rc < 0) return m->b.error ? m->b.error : rc;
    rc = taxi__lf_participate_locked(m->pool, room_or_closed, m, deadline,
                                     &m->send_waiter, "taxi_lf_mux_send");
    if (rc < 0) return rc;
  }
  return 0;
}

static bool unlocked_or_closed(void *arg) {
  const taxi_lf_mux_t *m = arg;
  return !m->sending || m->b.error;
}

int taxi_lf_mux_send(taxi_lf_mux_t *m, const void *data, size_t len,
                     int timeout_ms) {
  if (!m || (!data && len)) return TAXI_EINVAL;
  if (holds(reading, m)) return refuse_reading("taxi_lf_mux_send");
  if (holds(writing, m))
    return taxi__refuse(TAXI_EBUSY,
                        "taxi_lf_mux_send: m: this thread is sending on it "
                        "already (a hook run while the send waited for "
                        "room)");
  taxi_time_t deadline = taxi__deadline_after_ms(taxi_now(), timeout_ms);
  int rc = 0;
  taxi__mutex_lock(m->lock);
  m->b.users++;
  /* The holder of the write lock makes progress by itself (it takes part
   * in the pool while it waits for room), so those queued behind it may
   * simply sleep. */
  while (!unlocked_or_closed(m) && rc == 0) {
    if (deadline == INT64_MAX)
      taxi__cond_wait(&m->b.change, m->lock);
    else if (taxi__cond_timedwait(&m->b.change, m->lock, deadline) ==
                 TAXI_ETIMEDOUT &&
             !unlocked_or_closed(m))
      rc = TAXI_ETIMEDOUT;
  }
  if (rc == 0 && m->b.error) rc = m->b.error;
  if (rc == 0) {
    m->sending = true;
    role_t me = {m, writing};
    writing = &me;
    size_t sent = 0;
    rc = send_all_locked(m, data, len, deadline, &sent);
    writing = me.prev;
    m->sending = false;
    taxi__cond_broadcast(&m->b.change);
    if (rc < 0 && !m->b.error && (sent > 0 || rc != TAXI_ETIMEDOUT)) {
      /* Part of the data may have gone: the stream cannot be trusted. */
      fail_locked(m, rc);
      taxi__bound_leave_locked(&m->b);
      taxi__mutex_unlock(m->lock);
      taxi_reactor_remove(m->r, &m->h);
      return rc;
    }
  }
  taxi__bound_leave_locked(&m->b);
  taxi__mutex_unlock(m->lock);
  return rc;
}

static bool quiet(const taxi_lf_mux_t *m) { return m->closed && !m->b.users; }

int taxi_lf_mux_destroy(taxi_lf_mux_t *m) {
  if (!m) return TAXI_EINVAL;
  if (holds(reading, m)) return refuse_reading("taxi_lf_mux_destroy");
  fail(m, TAXI_ECANCELED);
  taxi__mutex_lock(m->lock);
  while (!quiet(m))
    taxi__cond_timedwait(&m->b.change, m->lock,
                         taxi_now() + 10 * TAXI_NSEC_PER_MSEC);
  taxi__mutex_unlock(m->lock);
  taxi__free(m->rbuf);
  taxi__bound_fini(&m->b);
  taxi__free(m);
  return 0;
}
