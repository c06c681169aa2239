/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/dgram.c - datagram endpoints (taxi/dgram.h): their options,
 * buffers and send queue, receiving and delivering, and their close.
 * What the socket does goes through the driver's dgram table and the
 * ports (sock.h); the driver reports back through the ops record below
 * (see core/stream/dgram_impl.h for the locks and the release).
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/batch_clock.h"
#include "core/common/detail.h"
#include "core/stream/dgram_impl.h"

#include <string.h>

/* Datagrams one flush sends in one batch. */
#define SEND_BATCH 16
/* Receive batches one readiness report runs: a bound, so that a flood on
 * one endpoint does not keep the thread from the others (what is left is
 * reported again, or edge-triggered taken up by the driver's timer). */
#define RECV_ROUNDS 4

void taxi_dgram_options_init(taxi_dgram_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->recv_size = 65536;
  o->recv_batch = 4;
  o->send_queue = 256 * 1024;
  o->send_slots = 64;
}

static int options(taxi_dgram_options_t *out, const taxi_dgram_options_t *in) {
  taxi_dgram_options_init(out);
  if (!in) return 0;
  if (in->recv_size > ((size_t)16 << 20))
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.recv_size: above 16 MiB");
  if (in->recv_batch > 64)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.recv_batch: above 64");
  if (in->send_queue &&
      (in->send_queue < TAXI_DGRAM_MAX || in->send_queue > ((size_t)1 << 30)))
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.send_queue: below "
                        "TAXI_DGRAM_MAX or above 1 GiB");
  if (in->send_slots > 65536)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.send_slots: above 65536");
  if (in->flags &
      ~(unsigned)(TAXI_DGRAM_V6ONLY | TAXI_DGRAM_REUSEADDR |
                  TAXI_DGRAM_BROADCAST | TAXI_DGRAM_GSO | TAXI_DGRAM_GRO))
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.flags: unknown bits");
  /* A coalesced receive that does not fit is cut, and the datagrams of
   * its end lost: the buffer must take the most the kernel coalesces. */
  if ((in->flags & TAXI_DGRAM_GRO) && in->recv_size && in->recv_size < 65536)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_dgram_open: options.recv_size: below 65,536 "
                        "with TAXI_DGRAM_GRO (a coalesced receive is up to "
                        "64 KiB)");
  if (in->recv_size) out->recv_size = in->recv_size;
  if (in->recv_batch) out->recv_batch = in->recv_batch;
  if (in->send_queue) out->send_queue = in->send_queue;
  if (in->send_slots) out->send_slots = in->send_slots;
  out->flags = in->flags;
  return 0;
}

/* ---- delivering and finishing ---------------------------------------------
 */

/* Nothing of d runs any more: close the socket, tell the application,
 * free.  Neither lock held. */
static void finish(taxi_dgram_t *d) {
  taxi__close(d->fd);
  if (d->close_fn) d->close_fn(d, d->close_arg);
  /* Before the unlink, which may let taxi_io_destroy free the
   * dispatcher that the driver gives buffers back to. */
  if (d->io->drv->dgram->fini) d->io->drv->dgram->fini(d);
  taxi__io_unlink_dgram(d->io, d);
  taxi__mutex_destroy(&d->cb_lock);
  taxi__mutex_destroy(&d->lock);
  taxi__free(d->rprep);
  taxi__free(d->rbuf);
  taxi__free(d->rmsg);
  taxi__free(d->sbuf);
  taxi__free(d->slots);
  taxi__free(d);
}

/* The endpoint whose callback the calling thread runs (NULL: none).  Per
 * thread, so that the thread asking whether it is in d's own callback
 * (a send, a connect, the release) reads what only it writes: no lock.
 * A release that comes while a callback runs can only come from that
 * callback (taxi_dgram_close inside it: the driver releases no endpoint
 * whose hooks run), so it is told the same way. */
static _Thread_local taxi_dgram_t *delivering TAXI__TLS_HOT;

/* Run the receive callback, cb_lock held.  True when d is gone (the
 * callback closed it and the release came meanwhile): cb_lock was let go
 * and d finished, so the caller must not touch d.  No lock of d's is
 * taken: closing is atomic, and released is written only by this thread
 * while it delivers (see `delivering`). */
static bool deliver(taxi_dgram_t *d, int status, const taxi__dgram_msg_t *m) {
  if (atomic_load(&d->closing)) return false;
  taxi_dgram_t *outer = delivering;
  delivering = d;
  taxi__batch_delivered();
  if (m)
    d->fn(d, 0, m->buf, m->len, &m->addr,
          m->truncated ? TAXI_DGRAM_TRUNCATED : 0u, d->arg);
  else
    d->fn(d, status, NULL, 0, NULL, 0, d->arg);
  delivering = outer;
  if (d->released) {
    taxi__mutex_unlock(&d->cb_lock);
    finish(d);
    return true;
  }
  return false;
}

/* Deliver what one receive got, cb_lock held: one datagram, or those the
 * kernel coalesced (m->seg bytes each, the last one possibly shorter),
 * each on its own and in order.  True when d is gone (as deliver). */
static bool deliver_split(taxi_dgram_t *d, taxi__dgram_msg_t *m) {
  if (m->seg == 0 || m->len <= m->seg) {
    taxi__dgram_count(&d->received, 1);
    return deliver(d, 0, m);
  }
  taxi__dgram_count(&d->coalesced, 1);
  taxi__dgram_msg_t one = *m;
  for (size_t off = 0; off < m->len; off += m->seg) {
    if (atomic_load(&d->closing)) break; /* closed by a callback */
    one.buf = (unsigned char *)m->buf + off;
    one.len = m->len - off < m->seg ? m->len - off : m->seg;
    /* A cut receive's last datagram is the one that lost its end. */
    one.truncated = m->truncated && off + one.len == m->len;
    taxi__dgram_count(&d->received, 1);
    if (deliver(d, 0, &one)) return true;
  }
  return false;
}

static void released(taxi_dgram_t *d) {
  /* Inline from d's own callback: its thread finishes d as it returns. */
  if (delivering == d)
    d->released = true;
  else
    finish(d);
}

static void flush_locked(taxi_dgram_t *d, int *err);

/* Send what the callbacks of a receive batch queued, cb_lock held; an
 * error of those sends goes to the receive callback.  True when d is gone
 * (as deliver).  A batch whose callbacks held nothing back (their sends
 * went at once: see taxi_dgram_send_to) has nothing to flush. */
static bool flush_held(taxi_dgram_t *d) {
  if (!d->held) return false;
  d->held = false;
  int err = 0;
  taxi__mutex_lock(&d->lock);
  if (!atomic_load(&d->closing) && d->qcount > 0 && !d->writing)
    flush_locked(d, &err);
  if (!err) err = d->held_err;
  d->held_err = 0;
  taxi__mutex_unlock(&d->lock);
  return err ? deliver(d, err, NULL) : false;
}

/* Receive and deliver.  On a reactor: from the socket, a bounded number
 * of batches (what is left is reported again).  Over a Proactor: what the
 * driver's receives brought in, until none is left, since no report
 * comes for datagrams that completed already (the driver starts its
 * receives again as it hands them out). */
static void readable(taxi_dgram_t *d) {
  const taxi__dgram_driver_t *drv = d->io->drv->dgram;
  int (*recv)(taxi_dgram_t *, taxi__dgram_msg_t *, unsigned) = drv->recv;
  bool more = false;
  taxi__mutex_lock(&d->cb_lock);
  for (int round = 0;; round++) {
    if (atomic_load(&d->closing)) break;
    if (!recv && round == RECV_ROUNDS) {
      more = true;
      break;
    }
    int n = recv ? recv(d, d->rmsg, d->rbatch)
                 : taxi__sock_recv_prepared(d->fd, d->rprep);
    if (n == TAXI_EAGAIN && round == 0 && !recv && drv->kept_error)
      n = drv->kept_error(d);
    if (n == TAXI_EAGAIN || n == 0) break;
    if (n < 0) {
      /* An ICMP error (connected), or the socket's own: told, and the
       * datagrams behind it are taken at the next report (or from the
       * driver's timer). */
      if (deliver(d, n, NULL)) return;
      if (recv) continue;
      more = true;
      break;
    }
    d->hold_sends = true;
    /* One datagram: the sends of its callback need not wait for others,
     * and go at once while nothing is queued (no copy into the queue). */
    d->hold_one =
        n == 1 && (d->rmsg[0].seg == 0 || d->rmsg[0].len <= d->rmsg[0].seg);
    for (int i = 0; i < n; i++)
      if (deliver_split(d, &d->rmsg[i])) return;
    d->hold_sends = false;
    /* The echoes and replies of the batch's callbacks, in one sendmmsg
     * rather than one system call each. */
    if (flush_held(d)) return;
    if (!recv && (unsigned)n < d->rbatch) break;
  }
  taxi__mutex_unlock(&d->cb_lock);
  /* d lives on: this runs in one of its hooks. */
  if (more && drv->more) drv->more(d);
}

/* ---- the send queue -------------------------------------------------------
 */

/* Where a datagram of len bytes goes in the ring, or -1 when it does not
 * fit.  Datagrams are kept whole: one that does not fit before the end
 * goes to the start, if the oldest has left room there. */
static long long ring_place(const taxi_dgram_t *d, size_t len) {
  if (d->qcount == 0) return len <= d->scap ? 0 : -1;
  const taxi__dgram_slot_t *first = &d->slots[d->qhead];
  const taxi__dgram_slot_t *last =
      &d->slots[(d->qhead + d->qcount - 1) % d->nslots];
  size_t head = first->off, tail = last->off + last->len;
  if (last->off < head) {
    /* Wrapped: the free room is [tail, head), kept short of head so that
     * the order of the offsets tells a wrapped ring. */
    return tail + len < head ? (long long)tail : -1;
  }
  if (tail + len <= d->scap) return (long long)tail;
  return len > 0 && len < head ? 0 : -1;
}

/* Queue a copy (lock held): 0, TAXI_ENOBUFS (no slot), TAXI_EAGAIN (no
 * room for the bytes). */
static int enqueue(taxi_dgram_t *d, const void *data, size_t len,
                   const taxi_addr_t *to) {
  if (d->qcount == d->nslots) return TAXI_ENOBUFS;
  long long off = ring_place(d, len);
  if (off < 0) return TAXI_EAGAIN;
  taxi__dgram_slot_t *sl = &d->slots[(d->qhead + d->qcount) % d->nslots];
  sl->off = (size_t)off;
  sl->len = len;
  if (len) memcpy(d->sbuf + sl->off, data, len);
  if (to)
    sl->to = *to;
  else
    memset(&sl->to, 0, sizeof sl->to);
  d->qcount++;
  return 0;
}

static void dequeue(taxi_dgram_t *d, unsigned n) {
  d->qhead = (d->qhead + n) % d->nslots;
  d->qcount -= n;
}

/* Send what is queued (lock held), until the socket would block.  The
 * error of a datagram that failed is stored in *err (the latest), the
 * datagram dropped. */
static void flush_locked(taxi_dgram_t *d, int *err) {
  bool blocked = false;
  while (d->qcount > 0) {
    taxi__dgram_msg_t m[SEND_BATCH];
    unsigned n = d->qcount < SEND_BATCH ? d->qcount : SEND_BATCH;
    for (unsigned i = 0; i < n; i++) {
      const taxi__dgram_slot_t *sl = &d->slots[(d->qhead + i) % d->nslots];
      m[i].buf = d->sbuf + sl->off;
      m[i].len = sl->len;
      m[i].cap = sl->len;
      m[i].addr = sl->to;
      m[i].truncated = false;
    }
    int rc = taxi__sock_send_batch(d->fd, m, n);
    if (rc == TAXI_EAGAIN) {
      blocked = true;
      break;
    }
    if (rc < 0) {
      *err = rc;
      dequeue(d, 1);
      continue;
    }
    dequeue(d, (unsigned)rc);
  }
  bool want = d->qcount > 0;
  /* On a reactor, a send that would block while d is watched for room
   * already has spent the report that brought it here: watching again
   * has the reactor look at the socket afresh.  Edge-triggered, no other
   * report would come if the socket had room after all (a send refused
   * for a moment); one that is full reports once it drains. */
  bool again = blocked && want && d->writing && !d->io->drv->dgram->recv;
  if ((want != d->writing || again) &&
      d->io->drv->dgram->want_write(d, want) == 0)
    d->writing = want;
}

static void writable(taxi_dgram_t *d) {
  int err = 0;
  taxi__mutex_lock(&d->lock);
  if (!atomic_load(&d->closing)) flush_locked(d, &err);
  taxi__mutex_unlock(&d->lock);
  if (err) {
    taxi__mutex_lock(&d->cb_lock);
    if (!deliver(d, err, NULL)) taxi__mutex_unlock(&d->cb_lock);
  }
}

/* Over a Proactor: the head left (the driver's send, status its
 * result); the rest of the queue follows. */
static void sent(taxi_dgram_t *d, int status) {
  int err = status < 0 ? status : 0;
  taxi__mutex_lock(&d->lock);
  d->writing = false;
  if (!atomic_load(&d->closing)) {
    if (d->qcount > 0) dequeue(d, 1);
    flush_locked(d, &err);
  }
  taxi__mutex_unlock(&d->lock);
  if (err) {
    taxi__mutex_lock(&d->cb_lock);
    if (!deliver(d, err, NULL)) taxi__mutex_unlock(&d->cb_lock);
  }
}

int taxi__dgram_enqueue(taxi_dgram_t *d, const void *data, size_t len,
                        const taxi_addr_t *to) {
  return enqueue(d, data, len, to);
}

void taxi__dgram_flush(taxi_dgram_t *d, int *err) { flush_locked(d, err); }

static int close_quiet(taxi_dgram_t *d) {
  return taxi_dgram_close(d, NULL, NULL);
}

static const taxi__dgram_ops_t dgram_ops = {.close = close_quiet,
                                            .readable = readable,
                                            .writable = writable,
                                            .sent = sent,
                                            .released = released};

/* ---- the API --------------------------------------------------------------
 */

int taxi_dgram_open(taxi_dgram_t **out, taxi_io_t *io, const char *local,
                    const taxi_dgram_options_t *o, taxi_dgram_recv_fn fn,
                    void *arg) {
  if (!out || !io || !local || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_dgram_open: %s: NULL",
                        !out     ? "out"
                        : !io    ? "io"
                        : !local ? "local"
                                 : "fn");
  *out = NULL;
  if (!io->drv->dgram)
    return taxi__refuse(TAXI_ENOTSUP,
                        "taxi_dgram_open: io: its dispatcher has no datagram "
                        "endpoints");
  taxi_dgram_options_t opt;
  int rc = options(&opt, o);
  if (rc < 0) return rc;
  taxi_addr_t a;
  rc = taxi_addr_parse(&a, local);
  if (rc < 0) return rc;
  if (a.family != TAXI_ADDR_IPV4 && a.family != TAXI_ADDR_IPV6)
    return taxi__refuse(TAXI_EBADADDR,
                        "taxi_dgram_open: local: not an IPv4 or IPv6 address");

  taxi_dgram_t *d = taxi__calloc(1, sizeof *d);
  if (!d) return TAXI_ENOMEM;
  d->io = io;
  d->ops = &dgram_ops;
  d->fn = fn;
  d->arg = arg;
  d->family = a.family;
  d->rsize = opt.recv_size;
  d->rbatch = opt.recv_batch;
  d->scap = opt.send_queue;
  d->nslots = opt.send_slots;
  d->rbuf = taxi__malloc(d->rsize * d->rbatch);
  d->rmsg = taxi__calloc(d->rbatch, sizeof *d->rmsg);
  d->sbuf = taxi__malloc(d->scap);
  d->slots = taxi__calloc(d->nslots, sizeof *d->slots);
  if (!d->rbuf || !d->rmsg || !d->sbuf || !d->slots) {
    rc = TAXI_ENOMEM;
    goto fail_mem;
  }
  /* A receive fills the rest of each record; its buffer stays. */
  for (unsigned i = 0; i < d->rbatch; i++) {
    d->rmsg[i].buf = d->rbuf + (size_t)i * d->rsize;
    d->rmsg[i].cap = d->rsize;
  }
  if (!io->drv->dgram->recv) {
    void *mem = taxi__malloc(taxi__sock_recv_prep_size(d->rbatch));
    if (!mem) {
      rc = TAXI_ENOMEM;
      goto fail_mem;
    }
    d->rprep = taxi__sock_recv_prepare(mem, d->rmsg, d->rbatch);
  }
  rc = taxi__mutex_init(&d->lock);
  if (rc < 0) goto fail_mem;
  rc = taxi__mutex_init(&d->cb_lock);
  if (rc < 0) goto fail_lock;
  unsigned sflags = 0;
  if (opt.flags & TAXI_DGRAM_V6ONLY) sflags |= TAXI__DG_V6ONLY;
  if (opt.flags & TAXI_DGRAM_REUSEADDR) sflags |= TAXI__DG_REUSEADDR;
  rc = taxi__sock_dgram(&a, sflags, &d->fd);
  if (rc < 0) goto fail_cb_lock;
  /* Read now, before the driver starts any receive: taxi_dgram_address
   * then makes no system call beside the operations in flight. */
  rc = taxi__sock_local_addr(d->fd, &d->local);
  if (rc < 0) goto fail_sock;
  if ((opt.flags & TAXI_DGRAM_BROADCAST) &&
      (rc = taxi__sock_broadcast(d->fd, true)) < 0)
    goto fail_sock;
  if ((opt.flags & TAXI_DGRAM_GSO) && (rc = taxi__sock_udp_gso(d->fd)) < 0) {
    if (rc == TAXI_ENOTSUP)
      taxi__refuse(rc,
                   "taxi_dgram_open: options.flags: TAXI_DGRAM_GSO: "
                   "the system cannot send UDP segments (UDP_SEGMENT)");
    goto fail_sock;
  }
  d->gso = (opt.flags & TAXI_DGRAM_GSO) != 0;
  /* A Proactor's receives (one datagram per operation) bring no segment
   * size with them: a coalesced receive could not be cut back. */
  if ((opt.flags & TAXI_DGRAM_GRO) && io->drv->dgram->recv) {
    rc = taxi__refuse(TAXI_ENOTSUP,
                      "taxi_dgram_open: options.flags: TAXI_DGRAM_GRO: "
                      "not on a Proactor's dispatcher");
    goto fail_sock;
  }
  if ((opt.flags & TAXI_DGRAM_GRO) &&
      (rc = taxi__sock_udp_gro(d->fd, true)) < 0) {
    if (rc == TAXI_ENOTSUP)
      taxi__refuse(rc,
                   "taxi_dgram_open: options.flags: TAXI_DGRAM_GRO: "
                   "the system cannot coalesce UDP receives (UDP_GRO)");
    goto fail_sock;
  }
  rc = taxi__io_link_dgram(io, d);
  if (rc < 0) goto fail_sock;
  rc = io->drv->dgram->open(d);
  if (rc < 0) goto fail_link;
  *out = d;
  return 0;

fail_link:
  taxi__io_unlink_dgram(io, d);
fail_sock:
  taxi__close(d->fd);
fail_cb_lock:
  taxi__mutex_destroy(&d->cb_lock);
fail_lock:
  taxi__mutex_destroy(&d->lock);
fail_mem:
  taxi__free(d->rprep);
  taxi__free(d->rbuf);
  taxi__free(d->rmsg);
  taxi__free(d->sbuf);
  taxi__free(d->slots);
  taxi__free(d);
  return rc;
}

/* Take the lock of an open endpoint: 0, or TAXI_EINVAL / TAXI_EBADF (then
 * not held). */
static int lock_open(taxi_dgram_t *d, const char *who) {
  if (!d) return taxi__refuse(TAXI_EINVAL, "%s: d: NULL", who);
  taxi__mutex_lock(&d->lock);
  if (atomic_load(&d->closing)) {
    taxi__mutex_unlock(&d->lock);
    return taxi__refuse(TAXI_EBADF, "%s: d: closed", who);
  }
  return 0;
}

int taxi__dgram_lock_open(taxi_dgram_t *d, const char *who) {
  return lock_open(d, who);
}

/* `text` as an address d may use: 0 or TAXI_EBADADDR (a detail of who). */
static int parse_for(const taxi_dgram_t *d, const char *text, taxi_addr_t *a,
                     const char *who) {
  int rc = taxi_addr_parse(a, text);
  if (rc < 0) return rc;
  if (a->family == TAXI_ADDR_IPV4 && d->family == TAXI_ADDR_IPV6)
    taxi__sockaddr_v4_mapped(a, a);
  else if (a->family != d->family)
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: not an address of the endpoint's "
                        "family",
                        who);
  return 0;
}

int taxi_dgram_connect(taxi_dgram_t *d, const char *peer) {
  if (!peer) return taxi__refuse(TAXI_EINVAL, "taxi_dgram_connect: peer: NULL");
  taxi_addr_t a;
  int rc = d ? parse_for(d, peer, &a, "taxi_dgram_connect: peer") : 0;
  if (rc < 0) return rc;
  rc = lock_open(d, "taxi_dgram_connect");
  if (rc < 0) return rc;
  /* Connected under cb_lock, which the receiving side holds around its
   * receives, so that they come before or after the connect, never beside
   * it; in d's own callback that thread holds it already. */
  bool in_own_cb = delivering == d;
  if (!in_own_cb) {
    taxi__mutex_unlock(&d->lock);
    taxi__mutex_lock(&d->cb_lock); /* before d->lock, as the receiver */
    rc = lock_open(d, "taxi_dgram_connect");
    if (rc < 0) {
      taxi__mutex_unlock(&d->cb_lock);
      return rc;
    }
  }
  /* A datagram socket connects at once: no handshake to wait for. */
  rc = taxi__sock_connect(d->fd, &a);
  if (rc == 0) d->connected = true;
  /* Bound to a wildcard, the socket now has the address its route picks;
   * if it cannot be read, the one kept still has the right port. */
  taxi_addr_t now;
  if (rc == 0 && taxi__sock_local_addr(d->fd, &now) == 0) d->local = now;
  taxi__mutex_unlock(&d->lock);
  if (!in_own_cb) taxi__mutex_unlock(&d->cb_lock);
  return rc;
}

/* One datagram straight to the socket (lock held): as
 * taxi__sock_send_batch of one.  The record is filled field by field and
 * only the bytes of the address in use are copied (16 of IPv4's 128):
 * zeroing and copying the whole record cost more than the rest of the
 * call.  A length beyond the address's bytes is kept as it is, for the
 * system to refuse, as it would the caller's own record. */
static int send_now(taxi_dgram_t *d, const void *data, size_t len,
                    const taxi_addr_t *to) {
  taxi__dgram_msg_t m;
  m.buf = (void *)(uintptr_t)data;
  m.cap = m.len = len;
  m.truncated = false;
  m.seg = 0;
  m.addr.family = 0;
  if (to) {
    m.addr.family = to->family;
    m.addr.len = to->len;
    memcpy(m.addr.sa.bytes, to->sa.bytes,
           to->len < sizeof m.addr.sa.bytes ? to->len : sizeof m.addr.sa.bytes);
  }
  return taxi__sock_send_batch(d->fd, &m, 1);
}

int taxi_dgram_send_to(taxi_dgram_t *d, const void *data, size_t len,
                       const taxi_addr_t *to) {
  if (!d || (!data && len > 0))
    return taxi__refuse(TAXI_EINVAL, "taxi_dgram_send_to: %s: NULL",
                        !d ? "d" : "data");
  if (len > TAXI_DGRAM_MAX)
    return taxi__refuse(TAXI_EMSGSIZE,
                        "taxi_dgram_send_to: len: above TAXI_DGRAM_MAX");
  taxi_addr_t mapped;
  if (to) {
    if (to->family == TAXI_ADDR_IPV4 && d->family == TAXI_ADDR_IPV6) {
      taxi__sockaddr_v4_mapped(to, &mapped);
      to = &mapped;
    } else if (to->family != d->family) {
      return taxi__refuse(TAXI_EBADADDR,
                          "taxi_dgram_send_to: to: not an "
                          "address of the endpoint's family");
    }
  }
  int rc = lock_open(d, "taxi_dgram_send_to");
  if (rc < 0) return rc;
  if (!to && !d->connected) {
    taxi__mutex_unlock(&d->lock);
    return taxi__refuse(TAXI_ENOENT,
                        "taxi_dgram_send_to: to: NULL, and no default peer");
  }
  /* In d's receive callback, while its batch is delivered: queued, to go
   * with the batch's other sends (flush_held), unless the queue is full.
   * A batch of one datagram has no others: its callback's first send goes
   * at once if nothing is queued (no copy into the queue, no lock taken
   * after the batch), its error told after the batch all the same; the
   * callback's further sends, if any, are held to leave together. */
  if (delivering == d && d->hold_sends) {
    if (d->hold_one && d->qcount == 0) {
      d->hold_one = false;
      rc = send_now(d, data, len, to);
      if (rc != TAXI_EAGAIN) {
        if (rc < 0) {
          d->held_err = rc;
          d->held = true;
        }
        taxi__mutex_unlock(&d->lock);
        return 0;
      }
    }
    rc = enqueue(d, data, len, to);
    if (rc == 0) {
      d->held = true;
      taxi__mutex_unlock(&d->lock);
      return 0;
    }
    /* Full: what is held goes now, and this one after it below.  An error
     * of theirs is told after the batch, as it would have been. */
    int err = 0;
    if (!d->writing) flush_locked(d, &err);
    if (err) {
      d->held_err = err;
      d->held = true;
    }
  }
  if (d->qcount == 0) {
    /* Nothing queued: straight to the socket, no copy. */
    rc = send_now(d, data, len, to);
    if (rc != TAXI_EAGAIN) {
      taxi__mutex_unlock(&d->lock);
      return rc < 0 ? rc : 0;
    }
  }
  rc = enqueue(d, data, len, to);
  if (rc == 0 && !d->writing && d->io->drv->dgram->want_write(d, true) == 0)
    d->writing = true;
  taxi__mutex_unlock(&d->lock);
  return rc;
}

int taxi_dgram_send(taxi_dgram_t *d, const void *data, size_t len) {
  return taxi_dgram_send_to(d, data, len, NULL);
}

int taxi_dgram_address(taxi_dgram_t *d, taxi_addr_t *out) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_dgram_address: out: NULL");
  int rc = lock_open(d, "taxi_dgram_address");
  if (rc < 0) return rc;
  *out = d->local;
  taxi__mutex_unlock(&d->lock);
  return 0;
}

int taxi_dgram_set_broadcast(taxi_dgram_t *d, bool on) {
  int rc = lock_open(d, "taxi_dgram_set_broadcast");
  if (rc < 0) return rc;
  rc = taxi__sock_broadcast(d->fd, on);
  taxi__mutex_unlock(&d->lock);
  return rc;
}

static int membership(taxi_dgram_t *d, const char *group, const char *iface,
                      bool join) {
  const char *who = join ? "taxi_dgram_join" : "taxi_dgram_leave";
  if (!d || !group)
    return taxi__refuse(TAXI_EINVAL, "%s: %s: NULL", who, !d ? "d" : "group");
  taxi_addr_t g, i;
  int rc = taxi_addr_parse(&g, group);
  if (rc == 0 && iface) rc = taxi_addr_parse(&i, iface);
  if (rc < 0) return rc;
  if (g.family != d->family || (iface && i.family != g.family))
    return taxi__refuse(TAXI_EBADADDR,
                        "%s: group: not of the endpoint's family", who);
  rc = lock_open(d, who);
  if (rc < 0) return rc;
  rc = taxi__sock_multicast(d->fd, &g, iface ? &i : NULL, join);
  taxi__mutex_unlock(&d->lock);
  if (rc == TAXI_EBADADDR)
    return taxi__refuse(rc, "%s: group: not a multicast address", who);
  return rc;
}

int taxi_dgram_join(taxi_dgram_t *d, const char *group, const char *iface) {
  return membership(d, group, iface, true);
}

int taxi_dgram_leave(taxi_dgram_t *d, const char *group, const char *iface) {
  return membership(d, group, iface, false);
}

int taxi_dgram_close(taxi_dgram_t *d, taxi_dgram_close_fn fn, void *arg) {
  int rc = lock_open(d, "taxi_dgram_close");
  if (rc < 0) return rc;
  atomic_store(&d->closing, true);
  d->close_fn = fn;
  d->close_arg = arg;
  d->qcount = 0; /* what is queued is dropped */
  taxi__mutex_unlock(&d->lock);
  d->io->drv->dgram->close(d);
  return 0;
}
