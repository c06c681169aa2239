/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/listener.c - listeners: the socket, the hand-over of each
 * accepted connection to the application as a new stream, and the pause after a
 * failed accept.
 *
 * The driver accepts (core/stream/io_reactive.c: non-blocking accept on
 * readiness; core/stream/io_proactive.c: a multishot accept operation) and
 * calls taxi__listener_accepted() or taxi__listener_failed() through the
 * listener's ops (l->ops, installed here).  Those two and the pause policy
 * below are all this layer knows about accepting, so the Reactor side can
 * move to a library Acceptor by replacing the driver's accept step and
 * deleting the policy.
 *
 * A sharded listener (TAXI_LISTEN_SHARDED) is a chain of members, one per
 * dispatcher the driver has (listener_members: a group's proactors), each
 * with its own socket bound to the same address and its own driver state;
 * the application sees the first.  Its callbacks, posts and on_close
 * serve all of them, and it goes last, with the chain (see lead_put).
 *
 * Calls stream.c (an accepted socket's stream), stream_settings.c (the
 * streams' options), io_lists.c, io_run.c (error reports), post.c,
 * address.c, the driver through its table, and the proactor (closing an
 * accepted socket it knows).
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/io_impl.h"
#include "core/common/options.h"
#include "core/common/detail.h"
#include "core/stream/tls_engine.h"

#include <string.h>

/* The pause after an accept that found no descriptor (EMFILE, ENFILE): it
 * starts at 10 ms and doubles while that lasts, up to 1 s; the
 * connections already served finish meanwhile and give some back.  Any
 * other failure (ENOMEM, ENOBUFS, ...) is paused for as every dispatcher's
 * transient failures are (core/common/backoff.h: 1 ms doubling to 256 ms).
 * Accepting again at once would find the same failure and spin.  A
 * listener never gives up: each failure is counted and reported, not
 * fatal (its connections wait in the listen backlog meanwhile). */
#define BACKOFF_FIRST (10 * TAXI_NSEC_PER_MSEC)
#define BACKOFF_MAX (1000 * TAXI_NSEC_PER_MSEC)

/* The longest options.defer_accept: an hour, past which a connection held
 * back is not worth keeping. */
#define DEFER_MAX 3600

void taxi_listener_options_init(taxi_listener_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
}

taxi_time_t taxi__listener_failed(taxi_listener_t *l, int rc) {
  TAXI__IO_COUNT(l->io, accept_errors, 1);
  taxi__mutex_lock(&l->lock);
  unsigned attempt = ++l->failures;
  taxi_time_t pause;
  if (rc == TAXI_ETOOMANY) {
    TAXI__IO_COUNT(l->io, accept_pauses, 1);
    pause = l->backoff;
    l->backoff = pause * 2 > BACKOFF_MAX ? BACKOFF_MAX : pause * 2;
  } else {
    pause = taxi__backoff_failed(&l->other);
    if (pause < 0) {
      /* Past the count that stops a dispatcher: a listener keeps trying,
       * at the longest pause. */
      pause = TAXI__BACKOFF_MAX_NS;
    }
  }
  taxi__mutex_unlock(&l->lock);
  taxi__report_error(taxi__io_on_error, l->io, rc, "accept", l->fd, attempt,
                     false);
  return pause;
}

void taxi__listener_recovered(taxi_listener_t *l) {
  taxi__mutex_lock(&l->lock);
  l->backoff = BACKOFF_FIRST;
  taxi__backoff_reset(&l->other);
  l->failures = 0;
  taxi__mutex_unlock(&l->lock);
}

void taxi__listener_accepted(taxi_listener_t *l, taxi_handle_t fd,
                             const taxi_addr_t *peer, taxi_proactor_t *home) {
  taxi_io_t *io = l->io;
  /* A member of a sharded listener accepts for the application's. */
  taxi_listener_t *pub = l->lead ? l->lead : l;
  taxi_stream_t *s;
  taxi__mutex_lock(&l->lock);
  bool closing = l->closing;
  taxi__mutex_unlock(&l->lock);
  int rc = TAXI_ESTOPPED;
  if (!closing) {
    /* The TLS context may be replaced meanwhile (taxi_listener_set_tls):
     * the stream takes its own reference to the one read here. */
    taxi__mutex_lock(&pub->lock);
    taxi_stream_options_t o = pub->sopts;
    taxi_tls_context_t *tls = o.tls;
    if (tls) taxi_tls_context_ref(tls);
    taxi__mutex_unlock(&pub->lock);
    rc = taxi__stream_new(io, fd, &o, home, pub->sharded, &s);
    if (tls) taxi_tls_context_unref(tls);
  }
  if (rc < 0) {
    /* The connection is dropped: the peer sees it closed. */
    if (home)
      taxi_proactor_close(home, fd);
    else
      taxi__close(fd);
    if (rc != TAXI_ESTOPPED) TAXI__IO_COUNT(io, accept_errors, 1);
    return;
  }
  /* A multishot accept (io_uring's) leaves the address out, since the
   * kernel would write every connection's into one buffer: ask the
   * socket then, before the peer has had much time to go (getpeername
   * fails once it has, and the stream has no peer to tell). */
  if (peer && peer->family)
    s->peer = *peer;
  else
    (void)taxi__sock_peer_addr(fd, &s->peer);
  s->own_fd = true; /* accepted here; nothing runs it yet: no lock needed */
  TAXI__IO_COUNT(io, accepts, 1);
  /* s is busy: nothing of it runs until the callback has returned and
   * taxi__stream_start lets it (in this dispatching thread).  cb_lock
   * keeps the listener's posted functions out meanwhile. */
  taxi__mutex_lock(&pub->cb_lock);
  pub->fn(pub, s, pub->arg);
  taxi__mutex_unlock(&pub->cb_lock);
  taxi__stream_start(s, true);
}

/* Free a listener that has no socket (or not any more). */
static void listener_free(taxi_listener_t *l) {
  if (l->sopts.tls) taxi_tls_context_unref(l->sopts.tls);
  taxi__mutex_destroy(&l->cb_lock);
  taxi__mutex_destroy(&l->lock);
  taxi__free(l);
}

/* Every member of l (the application's) is released: its posts are
 * cancelled, on_close runs, and it goes. */
static void listener_finish(taxi_listener_t *l) {
  taxi_io_t *io = l->io;
  /* Nothing runs them any more, and nothing adds to them: closed. */
  taxi__post_t *p;
  while ((p = taxi__post_pop(&l->posts))) {
    taxi_listener_post_fn fn = p->fn.l;
    void *arg = p->arg;
    taxi__post_put(io, p);
    fn(l, TAXI_ECANCELED, arg);
  }
  if (l->on_close) l->on_close(l, l->arg);
  taxi__io_unlink_listener(io, l);
  /* The members go with the first: whoever walks the chain (a close, a
   * pause) may do so until then. */
  taxi_listener_t *m = l->next_member;
  while (m) {
    taxi_listener_t *next = m->next_member;
    listener_free(m);
    m = next;
  }
  listener_free(l);
}

/* One count of lead->live is over (a member's release, the first's own,
 * or the creation's hold): the first goes after the last. */
static void lead_put(taxi_listener_t *lead, bool own) {
  taxi__mutex_lock(&lead->lock);
  if (own) lead->released_own = true;
  bool last = --lead->live == 0 && lead->released_own;
  taxi__mutex_unlock(&lead->lock);
  if (last) listener_finish(lead);
}

void taxi__listener_released(taxi_listener_t *l) {
  if (l->lead)
    lead_put(l->lead, false);
  else
    lead_put(l, true);
}

/* What the driver reports of a listener (accepts, failures, its release,
 * a run of its posts), and how taxi_io_destroy closes one. */
static const taxi__listener_ops_t listener_ops = {
    .close = taxi_listener_close,
    .accepted = taxi__listener_accepted,
    .failed = taxi__listener_failed,
    .recovered = taxi__listener_recovered,
    .released = taxi__listener_released,
    .run_posts = taxi__listener_run_posts,
};

/* A listener of io for fn(arg), with what o says but not yet a socket;
 * NULL with *rc set on failure. */
static taxi_listener_t *listener_new(taxi_io_t *io,
                                     const taxi_listener_options_t *o,
                                     taxi_accept_fn fn, void *arg,
                                     const char *where, int *rc) {
  taxi_listener_t *l = taxi__calloc(1, sizeof *l);
  if (!l) {
    *rc = TAXI_ENOMEM;
    return NULL;
  }
  l->io = io;
  l->ops = &listener_ops;
  l->fn = fn;
  l->arg = arg;
  l->on_close = o->on_close;
  l->backoff = BACKOFF_FIRST;
  l->live = 1;
  *rc = taxi__stream_options(&l->sopts, o->stream, where);
  if (*rc == 0 && l->sopts.tls && !l->sopts.tls->server)
    *rc = taxi__refuse(TAXI_EINVAL,
                       "%s.tls: a client context (a listener's streams are "
                       "servers: taxi_tls_server_create)",
                       where);
  if (*rc == 0 && l->sopts.tls) taxi_tls_context_ref(l->sopts.tls);
  if (*rc == 0) *rc = taxi__mutex_init(&l->lock);
  if (*rc < 0) {
    if (l->sopts.tls && l->sopts.tls->server)
      taxi_tls_context_unref(l->sopts.tls);
    taxi__free(l);
    return NULL;
  }
  if ((*rc = taxi__mutex_init(&l->cb_lock)) < 0) {
    if (l->sopts.tls) taxi_tls_context_unref(l->sopts.tls);
    taxi__mutex_destroy(&l->lock);
    taxi__free(l);
    return NULL;
  }
  return l;
}

/* l's socket is l->fd: learn its address and let the driver accept on it.
 * On failure the error is returned, l and its socket left to the caller. */
static int listener_start(taxi_listener_t *l, taxi_listener_t **out) {
  taxi_io_t *io = l->io;
  int rc = taxi__sock_local_addr(l->fd, &l->local);
  if (rc == 0) {
    rc = taxi__io_link_listener(io, l);
    if (rc == 0) {
      rc = io->drv->listener_open(l, 0);
      if (rc < 0) taxi__io_unlink_listener(io, l);
    }
  }
  if (rc < 0) return rc;
  *out = l;
  return 0;
}

/* A listening socket on `a` as o says (flags, backlog, defer_accept):
 * 0 with *out, or the error with its detail. */
static int listen_socket(const taxi_addr_t *a, const taxi_listener_options_t *o,
                         taxi_handle_t *out) {
  taxi_handle_t fd;
  int rc = taxi__sock_listen(a, o->backlog, o->flags, &fd);
  if (rc < 0) {
    if (rc == TAXI_ENOTSUP && (o->flags & TAXI_LISTEN_REUSEPORT))
      taxi__refuse(rc,
                   "taxi_listener_create: options.flags: %s, and no option "
                   "here balances connections over sockets sharing a port",
                   (o->flags & TAXI_LISTEN_SHARDED) ? "TAXI_LISTEN_SHARDED"
                                                    : "TAXI_LISTEN_REUSEPORT");
    return rc;
  }
  if (o->defer_accept > 0 &&
      (rc = taxi__sock_defer_accept(fd, o->defer_accept)) < 0) {
    if (rc == TAXI_ENOTSUP)
      taxi__refuse(rc,
                   "taxi_listener_create: options.defer_accept: no option "
                   "here holds connections back until their data (Linux's "
                   "TCP_DEFER_ACCEPT, on a TCP address)");
    taxi__close(fd);
    return rc;
  }
  *out = fd;
  return 0;
}

/* Close members of `lead` made by members_make that never accepted (they
 * are held: nothing of theirs is in flight, so each is released here and
 * now), and forget them. */
static void members_drop(taxi_listener_t *lead) {
  taxi_listener_t *m = lead->next_member;
  lead->next_member = NULL;
  while (m) {
    taxi_listener_t *next = m->next_member;
    m->closing = true; /* nothing else knows m yet: no lock needed */
    m->io->drv->listener_close(m); /* released at once: nothing in flight */
    listener_free(m);
    m = next;
  }
}

/*
 * The other members of sharded listener `lead` (its socket bound, its
 * address known, not yet started): one per member the driver has beyond
 * the first, each with a socket bound to lead's address (its port too,
 * when the system chose it).  They start held, so that no connection is
 * handed over before the application has the listener (members_go lets
 * them accept).  0, or the error with those made dropped.
 */
static int members_make(taxi_listener_t *lead,
                        const taxi_listener_options_t *o) {
  taxi_io_t *io = lead->io;
  unsigned n = io->drv->listener_members(io);
  taxi_listener_t **tail = &lead->next_member;
  int rc = 0;
  lead->sharded = n > 1;
  for (unsigned i = 1; i < n && rc == 0; i++) {
    taxi_listener_t *m =
        listener_new(io, o, lead->fn, lead->arg,
                     "taxi_listener_create: options.stream", &rc);
    if (!m) break;
    taxi_handle_t fd;
    if ((rc = listen_socket(&lead->local, o, &fd)) < 0) {
      listener_free(m);
      break;
    }
    m->fd = fd;
    m->local = lead->local;
    m->lead = lead;
    m->held = true;
    if ((rc = io->drv->listener_open(m, i)) < 0) {
      taxi__close(fd);
      listener_free(m);
      break;
    }
    *tail = m;
    tail = &m->next_member;
    lead->live++; /* lead is not yet known to any other thread */
  }
  if (rc < 0) members_drop(lead);
  return rc;
}

/* The members of a sharded listener, made held, accept now, unless the
 * application paused the listener meanwhile (its accept callback, called
 * for the first member's connections, may have).  A member that cannot
 * start accepting is closed: the kernel then sends its share of the
 * connections to the others. */
static void members_go(taxi_listener_t *lead) {
  if (!lead->next_member) return;
  /* Held meanwhile: the first is not released (nor its members freed)
   * under this loop should the application close the listener. */
  taxi__mutex_lock(&lead->lock);
  lead->live++;
  taxi__mutex_unlock(&lead->lock);
  for (taxi_listener_t *m = lead->next_member; m; m = m->next_member) {
    taxi__mutex_lock(&lead->lock);
    bool paused = lead->held || lead->closing;
    int rc = paused ? 0 : m->io->drv->listener_hold(m, false);
    taxi__mutex_unlock(&lead->lock);
    if (rc < 0) {
      taxi__report_error(taxi__io_on_error, m->io, rc, "accept", m->fd, 1,
                         false);
      taxi__mutex_lock(&m->lock);
      bool was = m->closing;
      m->closing = true;
      taxi__mutex_unlock(&m->lock);
      if (!was) m->io->drv->listener_close(m);
    }
  }
  lead_put(lead, false);
}

int taxi_listener_create(taxi_listener_t **out, taxi_io_t *io,
                         const char *address,
                         const taxi_listener_options_t *opts, taxi_accept_fn fn,
                         void *arg) {
  taxi_listener_options_t o;
  taxi_addr_t a;
  taxi_handle_t fd;
  int rc;
  if (!out || !io || !address || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_listener_create: %s: NULL",
                        !out       ? "out"
                        : !io      ? "io"
                        : !address ? "address"
                                   : "fn");
  taxi_listener_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_listener_create: options",
                         "taxi_listener_options_init") < 0)
    return TAXI_EINVAL;
  unsigned known = TAXI_LISTEN_REUSEPORT | TAXI_LISTEN_V6ONLY |
                   TAXI_LISTEN_NO_REUSEADDR | TAXI_LISTEN_SHARDED;
  if (o.flags & ~known)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_listener_create: options.flags: bits 0x%x are "
                        "not TAXI_LISTEN_REUSEPORT, _V6ONLY, _NO_REUSEADDR "
                        "or _SHARDED",
                        o.flags & ~known);
  /* Sharded: every member's socket balanced with the others'. */
  if (o.flags & TAXI_LISTEN_SHARDED) o.flags |= TAXI_LISTEN_REUSEPORT;
  if (o.defer_accept < 0 || o.defer_accept > DEFER_MAX)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_listener_create: options.defer_accept: 0 to %d "
                        "seconds; got %d",
                        DEFER_MAX, o.defer_accept);
  if ((rc = taxi_addr_parse(&a, address)) < 0)
    return taxi__refuse(rc,
                        "taxi_listener_create: address: \"%.64s\" is not an "
                        "address taxi_addr_parse reads (%s)",
                        address, taxi_strerror(rc));
  taxi_listener_t *l = listener_new(
      io, &o, fn, arg, "taxi_listener_create: options.stream", &rc);
  if (!l) return rc;
  if ((rc = listen_socket(&a, &o, &fd)) < 0) {
    listener_free(l);
    return rc;
  }
  l->fd = fd;
  if ((rc = taxi__sock_local_addr(fd, &l->local)) == 0 &&
      (o.flags & TAXI_LISTEN_SHARDED))
    rc = members_make(l, &o);
  if (rc == 0 && (rc = listener_start(l, out)) < 0) members_drop(l);
  if (rc < 0) {
    taxi__close(fd);
    listener_free(l);
    return rc;
  }
  members_go(l);
  return 0;
}

int taxi_listener_adopt(taxi_listener_t **out, taxi_io_t *io,
                        taxi_handle_t sock, const taxi_listener_options_t *opts,
                        taxi_accept_fn fn, void *arg) {
  taxi_listener_options_t o;
  int rc;
  if (!out || !io || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_listener_adopt: %s: NULL",
                        !out  ? "out"
                        : !io ? "io"
                              : "fn");
  taxi_listener_options_init(&o);
  if (taxi__options_copy(&o, sizeof o, opts, sizeof o,
                         "taxi_listener_adopt: options",
                         "taxi_listener_options_init") < 0)
    return TAXI_EINVAL;
  if (o.flags & ~TAXI_LISTEN_KEEP_SOCKET)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_listener_adopt: options.flags: only "
                        "TAXI_LISTEN_KEEP_SOCKET (the others are about "
                        "binding, which the caller did); got 0x%x",
                        o.flags);
  if (o.defer_accept != 0)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_listener_adopt: options.defer_accept: set on "
                        "the socket by the caller, who made it; got %d",
                        o.defer_accept);
  if (sock == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  /* Checked before anything changes the socket: a failed adoption leaves
   * it as it was, but for O_NONBLOCK. */
  if ((rc = taxi__sock_listening(sock)) < 0)
    return rc == TAXI_EINVAL ? taxi__refuse(rc,
                                            "taxi_listener_adopt: sock: a "
                                            "socket that is not listening")
                             : rc;
  if ((rc = taxi__set_nonblocking(sock)) < 0) return rc;
  taxi_listener_t *l =
      listener_new(io, &o, fn, arg, "taxi_listener_adopt: options.stream", &rc);
  if (!l) return rc;
  l->fd = sock;
  l->keep_socket = (o.flags & TAXI_LISTEN_KEEP_SOCKET) != 0;
  if ((rc = listener_start(l, out)) < 0) listener_free(l);
  return rc;
}

/* Hold or let go every member of l: all, or (on an error) none that was
 * not so before. */
static int listener_hold_all(taxi_listener_t *l, bool hold) {
  int rc = 0;
  taxi_listener_t *failed = NULL;
  for (taxi_listener_t *m = l; m && !failed; m = m->next_member)
    if ((rc = l->io->drv->listener_hold(m, hold)) < 0) failed = m;
  /* Undo those done, before the one that failed. */
  for (taxi_listener_t *u = l; failed && u != failed; u = u->next_member)
    (void)l->io->drv->listener_hold(u, !hold);
  return rc;
}

int taxi_listener_pause(taxi_listener_t *l) {
  if (!l) return TAXI_EINVAL;
  return listener_hold_all(l, true);
}

int taxi_listener_resume(taxi_listener_t *l) {
  if (!l) return TAXI_EINVAL;
  return listener_hold_all(l, false);
}

int taxi_listener_address(const taxi_listener_t *l, taxi_addr_t *out) {
  if (!l || !out) return TAXI_EINVAL;
  *out = l->local; /* set at creation, never changed */
  return 0;
}

int taxi_listener_close(taxi_listener_t *l) {
  if (!l) return TAXI_EINVAL;
  taxi__mutex_lock(&l->lock);
  bool was = l->closing;
  l->closing = true;
  taxi__mutex_unlock(&l->lock);
  if (was) return TAXI_EBADF;
  /* The members first: the first, released last, keeps the chain. */
  for (taxi_listener_t *m = l->next_member; m; m = m->next_member) {
    taxi__mutex_lock(&m->lock);
    bool m_was = m->closing;
    m->closing = true;
    taxi__mutex_unlock(&m->lock);
    if (!m_was) l->io->drv->listener_close(m);
  }
  l->io->drv->listener_close(l);
  return 0;
}

int taxi_listener_set_tls(taxi_listener_t *l, taxi_tls_context_t *c) {
  if (!l || (c && !c->server))
    return taxi__refuse(TAXI_EINVAL, "taxi_listener_set_tls: %s",
                        !l ? "l: NULL"
                           : "c: a client context (a listener's streams are "
                             "servers)");
  taxi__mutex_lock(&l->lock);
  if (l->closing) {
    taxi__mutex_unlock(&l->lock);
    return TAXI_EBADF;
  }
  taxi_tls_context_t *old = l->sopts.tls;
  if (c) taxi_tls_context_ref(c);
  l->sopts.tls = c;
  taxi__mutex_unlock(&l->lock);
  if (old) taxi_tls_context_unref(old);
  return 0;
}
