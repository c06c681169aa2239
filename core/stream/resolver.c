/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/resolver.c - the resolver of an I/O context: a few threads
 * of its own that run getaddrinfo (ports/sock.h: taxi__sock_resolve) or
 * the application's resolve_hook, so that no dispatching thread ever
 * waits for a name server, and the delivery of each answer to its
 * callback through the context's posts (core/stream/post.c), in a
 * dispatching thread.
 *
 * Made at the first resolution: the threads start as names wait for one,
 * up to resolve_threads, and names wait in a queue of at most
 * resolve_queue.  A resolution is posted exactly once, with its answer,
 * TAXI_ETIMEDOUT (the context's timer, armed for the earliest deadline),
 * or TAXI_ECANCELED (taxi_resolve_cancel, taxi_io_destroy); a thread
 * that answers after that drops its answer.
 *
 * A thread in getaddrinfo cannot be interrupted, so taxi_io_destroy does
 * not wait for the threads: they are detached, leave once their call
 * returns, and the last of them or the context frees the resolver.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/stream/resolve_impl.h"

#include <string.h>

typedef struct taxi__resolver {
  taxi__mutex_t lock;
  taxi__cond_t cond; /* a name queued, or closed */
  unsigned refs;     /* the context's, and one per thread */
  bool closed;       /* taxi_io_destroy began: no more posts */
  taxi_io_t *io;     /* while not closed */
  unsigned threads, idle, max_threads;
  unsigned queued, max_queue;
  taxi_resolve_t *head, *tail; /* the queue */
  /* Every resolution whose callback has not begun (posted or not). */
  taxi_resolve_t *waiting;
  taxi_resolve_hook_fn hook;
  void *hook_arg;
  /* The timeouts: a timer of the context's, armed for the earliest
   * deadline; arm_lock orders its arming (taken before lock). */
  taxi__mutex_t arm_lock;
  taxi_io_timer_t *timer;
  taxi_time_t armed_at; /* 0: not armed */
} taxi__resolver_t;

static void rs_free(taxi__resolver_t *rs) {
  taxi__mutex_destroy(&rs->arm_lock);
  taxi__cond_destroy(&rs->cond);
  taxi__mutex_destroy(&rs->lock);
  taxi__free(rs);
}

/* ---- posting ------------------------------------------------------------- */

static void deliver(taxi_io_t *io, int status, void *arg);

static void unwait_locked(taxi__resolver_t *rs, taxi_resolve_t *r) {
  if (r->wprev)
    r->wprev->wnext = r->wnext;
  else
    rs->waiting = r->wnext;
  if (r->wnext) r->wnext->wprev = r->wprev;
  r->wprev = r->wnext = NULL;
}

static void wait_locked(taxi__resolver_t *rs, taxi_resolve_t *r) {
  r->wprev = NULL;
  r->wnext = rs->waiting;
  if (rs->waiting) rs->waiting->wprev = r;
  rs->waiting = r;
}

static void unqueue_locked(taxi__resolver_t *rs, taxi_resolve_t *r) {
  if (!r->queued) return;
  taxi_resolve_t **at = &rs->head, *prev = NULL;
  while (*at && *at != r) {
    prev = *at;
    at = &(*at)->next;
  }
  if (*at) {
    *at = r->next;
    if (rs->tail == r) rs->tail = prev;
  }
  r->next = NULL;
  r->queued = false;
  rs->queued--;
}

/* The outcome of r is `status` (its addresses stored already): post its
 * delivery, once. */
static void post_locked(taxi__resolver_t *rs, taxi_resolve_t *r, int status) {
  unqueue_locked(rs, r);
  r->status = status;
  r->posted = true;
  taxi__io_post_record(rs->io, r->post, deliver, r);
  r->post = NULL; /* the context's again once it ran */
}

/* In a dispatching thread (or taxi_io_destroy's, status TAXI_ECANCELED). */
static void deliver(taxi_io_t *io, int status, void *arg) {
  taxi_resolve_t *r = arg;
  taxi__resolver_t *rs = r->rs;
  (void)io;
  taxi__mutex_lock(&rs->lock);
  r->running = true;
  unwait_locked(rs, r);
  int st = r->canceled ? TAXI_ECANCELED : status < 0 ? status : r->status;
  taxi__mutex_unlock(&rs->lock);
  r->fn(r, st, st == 0 ? r->addrs : NULL, st == 0 ? r->n : 0, r->arg);
  taxi__mutex_lock(&rs->lock);
  r->done = true;
  bool free_it = !r->in_thread; /* else the thread frees it */
  taxi__mutex_unlock(&rs->lock);
  if (free_it) taxi__free(r);
}

/* ---- timeouts ------------------------------------------------------------ */

static taxi_time_t earliest_locked(const taxi__resolver_t *rs) {
  taxi_time_t at = 0;
  for (const taxi_resolve_t *r = rs->waiting; r; r = r->wnext)
    if (!r->posted && r->deadline && (at == 0 || r->deadline < at))
      at = r->deadline;
  return at;
}

/* Make the timer fire by the earliest deadline (arm_lock held). */
static void arm(taxi__resolver_t *rs) {
  taxi__mutex_lock(&rs->lock);
  taxi_time_t at = rs->closed ? 0 : earliest_locked(rs);
  taxi__mutex_unlock(&rs->lock);
  if (at == 0 || !rs->timer || (rs->armed_at && rs->armed_at <= at)) return;
  taxi_time_t delay = at - taxi_now();
  if (taxi_io_timer_start(rs->timer, delay > 0 ? delay : 0, 0) == 0)
    rs->armed_at = at;
}

static void expire(taxi_io_timer_t *t, void *arg) {
  taxi__resolver_t *rs = arg;
  (void)t;
  taxi__mutex_lock(&rs->arm_lock);
  rs->armed_at = 0;
  taxi__mutex_lock(&rs->lock);
  taxi_time_t now = taxi_now();
  taxi_resolve_t *r = rs->waiting;
  while (r && !rs->closed) {
    taxi_resolve_t *next = r->wnext;
    if (!r->posted && r->deadline && r->deadline <= now)
      post_locked(rs, r, TAXI_ETIMEDOUT);
    r = next;
  }
  taxi__mutex_unlock(&rs->lock);
  arm(rs);
  taxi__mutex_unlock(&rs->arm_lock);
}

/* ---- the threads --------------------------------------------------------- */

/* Resolve r->host (in a resolver thread, no lock held). */
static int lookup(taxi__resolver_t *rs, taxi_resolve_t *r, taxi_addr_t *out) {
  int n;
  if (rs->hook) {
    char port[8];
    unsigned p = r->port, i = sizeof port - 1;
    port[i] = '\0';
    do {
      port[--i] = (char)('0' + p % 10);
      p /= 10;
    } while (p && i > 0);
    memset(out, 0, sizeof(taxi_addr_t) * TAXI_RESOLVE_MAX);
    n = rs->hook(r->host, port + i, r->family, out, TAXI_RESOLVE_MAX,
                 rs->hook_arg);
    if (n > TAXI_RESOLVE_MAX) n = TAXI_RESOLVE_MAX;
    if (n == 0) n = TAXI_ENOADDR;
    if (n < TAXI_ERROR_MIN) n = TAXI_ESYS; /* not a code of ours */
  } else {
    n = taxi__sock_resolve(r->host, r->port, r->family, out, TAXI_RESOLVE_MAX);
  }
  if (n < 0) return n;
  /* getaddrinfo's have it; a hook's may leave it 0. */
  for (int i = 0; i < n; i++)
    if (taxi__sockaddr_port(&out[i]) == 0)
      taxi__sockaddr_set_port(&out[i], r->port);
  size_t kept = taxi__addrs_order(out, (size_t)n, r->family);
  return kept ? (int)kept : TAXI_ENOADDR;
}

static void *resolver_thread(void *arg) {
  taxi__resolver_t *rs = arg;
  taxi_addr_t found[TAXI_RESOLVE_MAX];
  taxi__mutex_lock(&rs->lock);
  for (;;) {
    while (!rs->head && !rs->closed) {
      rs->idle++;
      taxi__cond_wait(&rs->cond, &rs->lock);
      rs->idle--;
    }
    if (rs->closed) break;
    taxi_resolve_t *r = rs->head;
    unqueue_locked(rs, r);
    r->in_thread = true;
    taxi__mutex_unlock(&rs->lock);
    /* r stays allocated while in_thread: its delivery leaves it to us. */
    int n = lookup(rs, r, found);
    taxi__mutex_lock(&rs->lock);
    r->in_thread = false;
    if (r->done) {
      taxi__free(r); /* delivered without us: cancelled, timed out */
    } else if (!r->posted && !rs->closed) {
      if (n > 0) {
        memcpy(r->addrs, found, sizeof(taxi_addr_t) * (size_t)n);
        r->n = (size_t)n;
      }
      post_locked(rs, r, n > 0 ? 0 : n);
    }
  }
  rs->threads--;
  bool last = --rs->refs == 0;
  taxi__mutex_unlock(&rs->lock);
  if (last) rs_free(rs);
  taxi__linger_end(); /* nothing of taxi's runs here any more */
  return NULL;
}

/* Another thread if the names waiting outnumber the idle threads (lock
 * held).  0, or the error of starting one when there is none at all. */
static int spawn_locked(taxi__resolver_t *rs) {
  if (rs->queued <= rs->idle || rs->threads >= rs->max_threads) return 0;
  taxi__thread_t t;
  taxi__linger_begin(); /* it may outlive the context (see alloc.h) */
  int rc = taxi__thread_create(&t, resolver_thread, rs);
  if (rc < 0) taxi__linger_end();
  if (rc == 0) {
    (void)taxi__thread_detach(t); /* see the top of this file */
    rs->threads++;
    rs->refs++;
    return 0;
  }
  /* Those running will come to it; with none, nothing would. */
  return rs->threads ? 0 : rc;
}

/* ---- the context's resolver ---------------------------------------------- */

static int rs_get(taxi_io_t *io, taxi__resolver_t **out) {
  taxi__mutex_lock(&io->lock);
  taxi__resolver_t *rs = io->resolver;
  bool gone = io->destroying;
  taxi__mutex_unlock(&io->lock);
  if (gone) return TAXI_ESTOPPED;
  if (rs) {
    *out = rs;
    return 0;
  }
  rs = taxi__calloc(1, sizeof *rs);
  if (!rs) return TAXI_ENOMEM;
  int rc = taxi__mutex_init(&rs->lock);
  if (rc < 0) goto fail_free;
  rc = taxi__cond_init(&rs->cond);
  if (rc < 0) goto fail_lock;
  rc = taxi__mutex_init(&rs->arm_lock);
  if (rc < 0) goto fail_cond;
  rc = taxi_io_timer_create(&rs->timer, io, expire, rs);
  if (rc < 0) goto fail_arm;
  rs->timer->internal = true;
  rs->io = io;
  rs->refs = 1;
  rs->max_threads = io->resolve_threads;
  rs->max_queue = io->resolve_queue;
  rs->hook = io->resolve_hook;
  rs->hook_arg = io->resolve_hook_arg;
  taxi__mutex_lock(&io->lock);
  taxi__resolver_t *other = io->resolver;
  if (!other && !io->destroying) io->resolver = rs;
  gone = io->destroying;
  taxi__mutex_unlock(&io->lock);
  if (other || gone) {
    /* Another thread made it first, or the context is going. */
    taxi_io_timer_destroy(rs->timer);
    rs_free(rs);
    if (gone) return TAXI_ESTOPPED;
    rs = other;
  }
  *out = rs;
  return 0;

fail_arm:
  taxi__mutex_destroy(&rs->arm_lock);
fail_cond:
  taxi__cond_destroy(&rs->cond);
fail_lock:
  taxi__mutex_destroy(&rs->lock);
fail_free:
  taxi__free(rs);
  return rc;
}

int taxi__resolve_start(taxi_resolve_t **out, taxi_io_t *io, const char *host,
                        unsigned port, int family, taxi_time_t timeout,
                        taxi_resolve_fn fn, void *arg, const char *who) {
  taxi__resolver_t *rs = NULL;
  int rc = rs_get(io, &rs);
  if (rc < 0)
    return rc == TAXI_ESTOPPED
               ? taxi__refuse(rc, "%s: io: being destroyed", who)
               : rc;
  taxi_resolve_t *r = taxi__calloc(1, sizeof *r);
  if (!r) return TAXI_ENOMEM;
  r->post = taxi__post_get(io);
  if (!r->post) {
    taxi__free(r);
    return TAXI_ENOMEM;
  }
  r->rs = rs;
  r->fn = fn;
  r->arg = arg;
  r->family = family;
  r->port = port;
  r->deadline = timeout > 0 ? taxi_now() + timeout : 0;
  size_t hlen = strlen(host);
  memcpy(r->host, host, hlen + 1);
  taxi_addr_t a;
  bool numeric = taxi__host_numeric(host, port, &a);

  bool timed = r->deadline != 0;
  taxi__mutex_lock(&rs->arm_lock);
  taxi__mutex_lock(&rs->lock);
  /* Set before r can be delivered (and freed): the caller's pointer is
   * valid from the start until its callback returns. */
  if (out) *out = r;
  rc = 0;
  if (rs->closed) {
    rc = taxi__refuse(TAXI_ESTOPPED, "%s: io: being destroyed", who);
  } else if (numeric) {
    /* No thread needed; the callback still comes through the posts. */
    r->addrs[0] = a;
    r->n = taxi__addrs_order(r->addrs, 1, family);
    wait_locked(rs, r);
    post_locked(rs, r, r->n ? 0 : TAXI_ENOADDR);
  } else if (rs->queued >= rs->max_queue) {
    rc = taxi__refuse(TAXI_ENOBUFS,
                      "%s: io: %u names wait for a resolver thread already "
                      "(options.resolve_queue)",
                      who, rs->queued);
  } else {
    r->queued = true;
    if (rs->tail)
      rs->tail->next = r;
    else
      rs->head = r;
    rs->tail = r;
    rs->queued++;
    wait_locked(rs, r);
    rc = spawn_locked(rs);
    if (rc < 0) {
      unqueue_locked(rs, r);
      unwait_locked(rs, r);
    } else {
      taxi__cond_signal(&rs->cond);
    }
  }
  taxi__mutex_unlock(&rs->lock);
  /* r may be delivered and freed by now: not touched again. */
  if (rc == 0 && timed) arm(rs);
  taxi__mutex_unlock(&rs->arm_lock);
  if (rc < 0) {
    if (out) *out = NULL;
    taxi__post_put(io, r->post);
    taxi__free(r);
    return rc;
  }
  return 0;
}

int taxi_resolve_cancel(taxi_resolve_t *r) {
  if (!r) return taxi__refuse(TAXI_EINVAL, "taxi_resolve_cancel: r: NULL");
  taxi__resolver_t *rs = r->rs;
  taxi__mutex_lock(&rs->lock);
  int rc = 0;
  if (r->running) {
    rc = taxi__refuse(TAXI_EBUSY,
                      "taxi_resolve_cancel: r: its callback is running");
  } else {
    r->canceled = true;
    if (!r->posted && !rs->closed) post_locked(rs, r, TAXI_ECANCELED);
  }
  taxi__mutex_unlock(&rs->lock);
  return rc;
}

void taxi__resolver_close(taxi_io_t *io) {
  taxi__mutex_lock(&io->lock);
  taxi__resolver_t *rs = io->resolver;
  taxi__mutex_unlock(&io->lock);
  if (!rs) return;
  taxi__mutex_lock(&rs->arm_lock);
  taxi__mutex_lock(&rs->lock);
  /* Answered ones whose delivery has not begun are cancelled too: the
   * drain of taxi_io_destroy may still run their posts. */
  for (taxi_resolve_t *r = rs->waiting; r; r = r->wnext) {
    r->canceled = true;
    if (!r->posted) post_locked(rs, r, TAXI_ECANCELED);
  }
  rs->closed = true;
  taxi__cond_broadcast(&rs->cond);
  taxi__mutex_unlock(&rs->lock);
  /* Nothing dispatches the context now (taxi_io_destroy refuses while a
   * thread runs it): expire cannot be running.  Destroyed here, once;
   * the destroy's own round of timers skips it. */
  taxi_io_timer_destroy(rs->timer);
  rs->timer = NULL;
  taxi__mutex_unlock(&rs->arm_lock);
}

void taxi__resolver_release(taxi_io_t *io) {
  taxi__resolver_t *rs = io->resolver;
  if (!rs) return;
  io->resolver = NULL;
  taxi__mutex_lock(&rs->lock);
  rs->io = NULL;
  bool last = --rs->refs == 0;
  taxi__mutex_unlock(&rs->lock);
  if (last) rs_free(rs);
}
