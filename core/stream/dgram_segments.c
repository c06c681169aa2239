/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/dgram_segments.c - sending a run of equal-size datagrams in
 * few system calls (taxi_dgram_send_segments: one UDP_SEGMENT send where
 * the endpoint has TAXI_DGRAM_GSO, else through the send queue's batches),
 * and an endpoint's counters.  The queue and its locks are dgram.c's (see
 * core/stream/dgram_impl.h).
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/dgram_impl.h"

#include <string.h>

/* The checks of the caller's arguments: 0 or TAXI_EINVAL with a detail,
 * and the number of segments in *count. */
static int check_segments(const taxi_dgram_t *d, const void *data, size_t len,
                          size_t seg, unsigned *count) {
  static const char fn[] = "taxi_dgram_send_segments";
  if (!d || !data)
    return taxi__refuse(TAXI_EINVAL, "%s: %s: NULL", fn, !d ? "d" : "data");
  if (seg == 0) return taxi__refuse(TAXI_EINVAL, "%s: seg: 0", fn);
  if (seg > TAXI_DGRAM_MAX)
    return taxi__refuse(TAXI_EINVAL, "%s: seg: above TAXI_DGRAM_MAX", fn);
  if (len == 0) return taxi__refuse(TAXI_EINVAL, "%s: len: 0 (no segment)", fn);
  /* Compared before rounding up, so that a huge len cannot overflow. */
  if (len / seg > TAXI_DGRAM_SEGMENTS_MAX ||
      (len / seg == TAXI_DGRAM_SEGMENTS_MAX && len % seg))
    return taxi__refuse(TAXI_EINVAL,
                        "%s: len: more than TAXI_DGRAM_SEGMENTS_MAX segments "
                        "of seg bytes",
                        fn);
  *count = (unsigned)(len / seg + (len % seg ? 1 : 0));
  return 0;
}

int taxi_dgram_send_segments(taxi_dgram_t *d, const void *data, size_t len,
                             size_t seg, const taxi_addr_t *to) {
  static const char fn[] = "taxi_dgram_send_segments";
  unsigned count = 0;
  int rc = check_segments(d, data, len, seg, &count);
  if (rc < 0) return rc;
  taxi_addr_t mapped;
  if (to) {
    if (to->family == TAXI_ADDR_IPV4 && d->family == TAXI_ADDR_IPV6) {
      taxi__sockaddr_v4_mapped(to, &mapped);
      to = &mapped;
    } else if (to->family != d->family) {
      return taxi__refuse(
          TAXI_EBADADDR, "%s: to: not an address of the endpoint's family", fn);
    }
  }
  rc = taxi__dgram_lock_open(d, fn);
  if (rc < 0) return rc;
  if (!to && !d->connected) {
    taxi__mutex_unlock(&d->lock);
    return taxi__refuse(TAXI_ENOENT, "%s: to: NULL, and no default peer", fn);
  }
  const unsigned char *p = data;
  /* One system call for all of them when nothing queued must go first,
   * and the whole fits one IP datagram (the kernel's bound). */
  if (d->gso && d->qcount == 0 && count > 1 && len <= TAXI_DGRAM_MAX) {
    rc = taxi__sock_send_segments(d->fd, p, len, seg, to);
    if (rc == 0) taxi__dgram_count(&d->segment_sends, 1);
    if (rc != TAXI_EAGAIN && rc != TAXI_ENOTSUP) {
      taxi__mutex_unlock(&d->lock);
      return rc;
    }
    /* TAXI_EAGAIN: queued below; TAXI_ENOTSUP (this path or device):
     * one datagram each below. */
  }
  /* Queued all, or none: a segment that finds no room takes the ones
   * queued before it back out (they are the ring's last slots). */
  bool was_empty = d->qcount == 0;
  for (unsigned i = 0; i < count; i++) {
    size_t off = (size_t)i * seg;
    size_t n = len - off < seg ? len - off : seg;
    rc = taxi__dgram_enqueue(d, p + off, n, to);
    if (rc < 0) {
      d->qcount -= i;
      taxi__mutex_unlock(&d->lock);
      return rc;
    }
  }
  int err = 0;
  /* Behind other datagrams, they wait for their turn; else they go now,
   * in batches, and what the socket does not take waits for writability
   * (the flush asks the driver for it). */
  if (was_empty)
    taxi__dgram_flush(d, &err);
  else if (!d->writing && d->io->drv->dgram->want_write(d, true) == 0)
    d->writing = true;
  taxi__mutex_unlock(&d->lock);
  return err;
}

int taxi_dgram_counters(taxi_dgram_t *d, taxi_dgram_counters_t *out) {
  if (!out) return taxi__refuse(TAXI_EINVAL, "taxi_dgram_counters: out: NULL");
  int rc = taxi__dgram_lock_open(d, "taxi_dgram_counters");
  if (rc < 0) return rc;
  memset(out, 0, sizeof *out);
  out->received = atomic_load_explicit(&d->received, memory_order_relaxed);
  out->coalesced = atomic_load_explicit(&d->coalesced, memory_order_relaxed);
  out->segment_sends =
      atomic_load_explicit(&d->segment_sends, memory_order_relaxed);
  taxi__mutex_unlock(&d->lock);
  return 0;
}
