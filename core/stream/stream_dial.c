/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_dial.c - taxi_stream_connect to a host name: the name
 * resolved off the dispatching threads (core/stream/resolver.c), then its
 * addresses raced as RFC 8305 (Happy Eyeballs v2) says.
 *
 * The application's stream exists from the call on, without a socket
 * (S_DIALING): it takes writes, reads and a close as any stream still
 * connecting does, its connect timeout covers the resolution, and its
 * rounds run the race (round_locked, through s->dial_ops), serialised with its
 * callbacks as every round is.  Each attempt is a stream of the library's
 * own connecting to one address (quiet: not counted in the context's
 * counters); a new one starts every attempt delay while the earlier ones
 * are pending, or at once when one fails.  The first to connect wins: it
 * is detached (taxi_stream_detach), and its socket becomes the
 * application stream's; the others are closed.  If all fail, the connect
 * callback gets the last one's error.
 *
 * The dial lives until the application's stream has let it go (won, failed,
 * or closed), its resolution's callback has run and every attempt is
 * gone.  Its lock comes before the streams' locks (an attempt's, the
 * application's) and the resolver's; no callback runs under it.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/resolve_impl.h"

#include <string.h>

/* The RFC's "Connection Attempt Delay": its default, and its bounds. */
#define ATTEMPT_DELAY (250 * TAXI_NSEC_PER_MSEC)

typedef struct taxi__dial taxi__dial_t;

typedef struct attempt {
  taxi__dial_t *d;
  taxi_stream_t *s; /* until its close (or detach) callback */
  taxi_addr_t addr;
} attempt_t;

struct taxi__dial {
  taxi__mutex_t lock;
  taxi_io_t *io;
  taxi_stream_t *owner; /* the application's stream; NULL once let go */
  taxi_resolve_t *res;  /* until its callback runs */
  int resolved;         /* 0 waiting, 1 answered, < 0 its failure */
  taxi_addr_t addrs[TAXI_RESOLVE_MAX];
  size_t naddrs, next; /* addresses, and the next to try */
  attempt_t att[TAXI_RESOLVE_MAX];
  unsigned live; /* attempts whose stream is not gone */
  bool won;      /* one connected: its detach is on its way */
  bool have_fd;  /* its socket, not yet taken by the owner */
  taxi_handle_t fd;
  taxi_addr_t peer;
  int last_err;
  taxi_time_t delay, next_at;
  taxi_stream_options_t aopts; /* the attempts' */
  /* The owner's, for its socket once it has one. */
  unsigned oflags, ka_idle, ka_interval, ka_count;
  void (*on_attempt)(taxi_stream_t *s, const taxi_addr_t *a);
};

static void dial_free(taxi__dial_t *d) {
  taxi__mutex_destroy(&d->lock);
  taxi__free(d);
}

/* Whether nothing refers to d any more (lock held): then free it. */
static bool unused_locked(const taxi__dial_t *d) {
  return !d->owner && !d->res && d->live == 0;
}

/* Have the owner's round come soon (lock held). */
static void wake_locked(taxi__dial_t *d) {
  if (!d->owner) return;
  taxi__mutex_lock(&d->owner->lock);
  taxi__stream_request_locked(d->owner);
  taxi__mutex_unlock(&d->owner->lock);
}

/* ---- events from elsewhere ----------------------------------------------- */

static void resolved(taxi_resolve_t *r, int status, const taxi_addr_t *addrs,
                     size_t n, void *arg) {
  taxi__dial_t *d = arg;
  (void)r;
  taxi__mutex_lock(&d->lock);
  d->res = NULL;
  d->resolved = status < 0 ? status : 1;
  if (status == 0) {
    memcpy(d->addrs, addrs, n * sizeof *addrs);
    d->naddrs = n;
  }
  wake_locked(d);
  bool free_it = unused_locked(d);
  taxi__mutex_unlock(&d->lock);
  if (free_it) dial_free(d);
}

static void attempt_detached(taxi_stream_t *s, taxi_handle_t h,
                             const void *buffered, size_t len, void *arg) {
  attempt_t *a = arg;
  taxi__dial_t *d = a->d;
  (void)s;
  (void)buffered; /* nothing was read: no read was ever started */
  (void)len;
  taxi__mutex_lock(&d->lock);
  a->s = NULL;
  d->live--;
  if (d->owner) {
    d->fd = h;
    d->peer = a->addr;
    d->have_fd = true;
    wake_locked(d);
  } else {
    taxi__close(h); /* the owner went meanwhile */
  }
  bool free_it = unused_locked(d);
  taxi__mutex_unlock(&d->lock);
  if (free_it) dial_free(d);
}

static void attempt_closed(taxi_stream_t *s, int reason) {
  attempt_t *a = s->data;
  taxi__dial_t *d = a->d;
  (void)reason; /* its connect callback told the error already */
  taxi__mutex_lock(&d->lock);
  a->s = NULL;
  d->live--;
  wake_locked(d);
  bool free_it = unused_locked(d);
  taxi__mutex_unlock(&d->lock);
  if (free_it) dial_free(d);
}

/* Close every attempt but `keep` (lock held: a close only flags the
 * stream and kicks it, running no callback here). */
static void close_others_locked(taxi__dial_t *d, const attempt_t *keep) {
  for (size_t i = 0; i < d->next; i++)
    if (&d->att[i] != keep && d->att[i].s) (void)taxi_stream_close(d->att[i].s);
}

static void attempt_connected(taxi_stream_t *s, int status, void *arg) {
  attempt_t *a = arg;
  taxi__dial_t *d = a->d;
  taxi__mutex_lock(&d->lock);
  bool take = status == 0 && d->owner && !d->won;
  if (take) {
    d->won = true;
    close_others_locked(d, a);
  } else if (status < 0) {
    d->last_err = status;
    d->next_at = 0; /* the next address now (RFC 8305, section 5) */
    wake_locked(d);
  }
  taxi__mutex_unlock(&d->lock);
  if (status < 0) return; /* the stream closes by itself */
  if (!take) {
    (void)taxi_stream_close(s); /* too late: another won, or no owner */
    return;
  }
  int rc = taxi_stream_detach(s, attempt_detached, a);
  if (rc < 0) {
    taxi__mutex_lock(&d->lock);
    d->won = false;
    d->last_err = rc;
    d->next_at = 0;
    wake_locked(d);
    taxi__mutex_unlock(&d->lock);
    (void)taxi_stream_close(s);
  }
}

/* ---- the owner's side ---------------------------------------------------- */

static int round_locked(taxi_stream_t *s, taxi_time_t now);
static void abandon_locked(taxi_stream_t *s);

/* How the state machine (stream.c) runs the race without naming it. */
static const taxi__dial_ops_t dial_ops = {round_locked, abandon_locked};

int taxi__dial_start(taxi_stream_t *s, const char *host, unsigned port,
                     const taxi_stream_options_t *o) {
  taxi__dial_t *d = taxi__calloc(1, sizeof *d);
  if (!d) return TAXI_ENOMEM;
  int rc = taxi__mutex_init(&d->lock);
  if (rc < 0) {
    taxi__free(d);
    return rc;
  }
  d->io = s->io;
  d->owner = s;
  d->fd = TAXI_INVALID_HANDLE;
  d->last_err = TAXI_ENOADDR;
  d->delay = o->attempt_delay ? o->attempt_delay : ATTEMPT_DELAY;
  d->oflags = o->flags;
  d->ka_idle = o->keepalive_idle;
  d->ka_interval = o->keepalive_interval;
  d->ka_count = o->keepalive_count;
  d->on_attempt = o->on_attempt;
  /* An attempt only connects: the smallest buffers, no timeout of its
   * own (the owner's covers the whole connect). */
  taxi_stream_options_init(&d->aopts);
  d->aopts.read_buffer = 16;
  d->aopts.high_watermark = 16;
  d->aopts.low_watermark = 0;
  d->aopts.max_writes = 1;
  d->aopts.flags = TAXI__STREAM_QUIET;
  /* Under the dial's lock: the answer may come in another thread before
   * d->res is set. */
  taxi__mutex_lock(&d->lock);
  rc = taxi__resolve_start(&d->res, s->io, host, port, 0, 0, resolved, d,
                           "taxi_stream_connect");
  taxi__mutex_unlock(&d->lock);
  if (rc < 0) {
    dial_free(d);
    return rc;
  }
  s->dial_ops = &dial_ops;
  s->dial = d;
  return 0;
}

/* Start attempts as due (lock held): their addresses into started[]. */
static size_t attempts_locked(taxi__dial_t *d, taxi_time_t now,
                              taxi_addr_t *started) {
  size_t k = 0;
  while (d->next < d->naddrs && (d->live == 0 || now >= d->next_at)) {
    attempt_t *a = &d->att[d->next];
    a->d = d;
    a->addr = d->addrs[d->next++];
    int rc = taxi__stream_connect_to(&a->s, d->io, &a->addr, &d->aopts,
                                     attempt_connected, attempt_closed, a);
    started[k++] = a->addr;
    if (rc < 0) {
      a->s = NULL;
      d->last_err = rc; /* no socket of that family here, ...: the next */
      continue;
    }
    d->live++;
    d->next_at = now + d->delay;
  }
  return k;
}

static int round_locked(taxi_stream_t *s, taxi_time_t now) {
  taxi__dial_t *d = s->dial;
  taxi_addr_t started[TAXI_RESOLVE_MAX];
  taxi_handle_t fd = TAXI_INVALID_HANDLE;
  taxi_addr_t peer;
  size_t k = 0;
  int rc = TAXI_EAGAIN;
  s->dial_at = 0;
  taxi__stream_unlock(s);
  taxi__mutex_lock(&d->lock);
  if (d->have_fd) {
    d->have_fd = false;
    fd = d->fd;
    peer = d->peer;
    rc = 0;
  } else if (d->resolved < 0) {
    rc = d->resolved;
  } else if (d->resolved > 0 && !d->won) {
    k = attempts_locked(d, now, started);
    if (d->live == 0 && d->next >= d->naddrs) rc = d->last_err;
  }
  /* The next attempt's time, while one is to come (none once one won:
   * its socket comes with the detach). */
  taxi_time_t next_at =
      !d->won && d->next < d->naddrs && d->live > 0 ? d->next_at : 0;
  /* What the socket needs once d may be gone (abandoned below). */
  unsigned oflags = d->oflags, ka_idle = d->ka_idle,
           ka_interval = d->ka_interval, ka_count = d->ka_count;
  void (*on_attempt)(taxi_stream_t *, const taxi_addr_t *) = d->on_attempt;
  taxi__mutex_unlock(&d->lock);
  /* The addresses tried, in order, for the application that asked. */
  for (size_t i = 0; i < k && on_attempt; i++) on_attempt(s, &started[i]);
  taxi__stream_lock(s);
  if (rc == TAXI_EAGAIN) {
    s->dial_at = next_at;
    return rc;
  }
  abandon_locked(s);
  if (rc < 0) return rc;
  /* The winner's socket is the stream's now. */
  s->fd = fd;
  s->peer = peer;
  s->keep_handle = false;
  s->own_fd = true;
  s->flags &= ~TAXI__S_DIALING;
  if (oflags & TAXI_STREAM_NODELAY) (void)taxi__sock_nodelay(fd, true);
  if (oflags & TAXI_STREAM_KEEPALIVE)
    (void)taxi__sock_keepalive(fd, true, ka_idle, ka_interval, ka_count);
  return s->io->drv->adopt ? s->io->drv->adopt(s) : 0;
}

static void abandon_locked(taxi_stream_t *s) {
  taxi__dial_t *d = s->dial;
  if (!d) return;
  s->dial = NULL;
  s->dial_at = 0;
  taxi__stream_unlock(s);
  taxi__mutex_lock(&d->lock);
  d->owner = NULL;
  /* Its callback, which may be running (then TAXI_EBUSY), frees nothing
   * of ours: it waits for this lock, and finds no owner. */
  if (d->res) (void)taxi_resolve_cancel(d->res);
  close_others_locked(d, NULL);
  if (d->have_fd) {
    taxi__close(d->fd); /* a winner the owner did not take */
    d->have_fd = false;
  }
  bool free_it = unused_locked(d);
  taxi__mutex_unlock(&d->lock);
  if (free_it) dial_free(d);
  taxi__stream_lock(s);
}
