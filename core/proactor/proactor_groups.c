/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_groups.c - the groups of provided buffers of
 * datagram receives (core/proactor/proactor_groups.h): which sizes there
 * are, registering them with the backend when the proactor is made, and
 * making a group's buffers when an endpoint first asks for it.  The
 * buffers themselves are kept, lent, grown and given back by
 * core/proactor/proactor_buffers.c, as the pool's are.
 *
 * The rings are registered with the proactor (an empty ring of a page or
 * two a size, no buffer): a one-thread io_uring ring takes registrations
 * from its owner alone once enabled, and an endpoint may be opened from
 * any thread.  Giving buffers to a registered ring is memory only, from
 * any thread, so the buffers wait for the first endpoint.
 *
 * Layer 1, with the buffers (core/proactor/proactor_impl.h); the entry
 * for the stream layer takes the proactor's lock.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/proactor/proactor_groups.h"
#include "core/proactor/proactor_impl.h"

#include <stdlib.h>

/* The sizes: the datagram each group's buffers hold (the buffer has
 * TAXI_PROACTOR_DGRAM_ROOM more for the kernel's header and the sender's
 * address), group 1 upwards; a receive takes the smallest that holds its
 * recv_size.  Two, so that an endpoint of a few KiB does not hold 64 KiB
 * a datagram in flight. */
static const size_t group_payload[TAXI__BUF_GROUPS] = {0, 16384,
                                                       TAXI__DGROUP_MAX_RECV};

/* Buffers a group starts with; its cap (about 32 MiB of buffers: datagrams
 * in flight at once, held by handlers or waiting for them). */
#define GROUP_FIRST 8u
static const unsigned group_cap[TAXI__BUF_GROUPS] = {0, 2048, 512};

/* The most a ring of provided buffers takes (the kernel's limit). */
#define RING_MAX 32768u

static size_t group_size(unsigned g) {
  return group_payload[g] + TAXI_PROACTOR_DGRAM_ROOM;
}

/* TAXI_PROACTOR_DGRAM_BUFFERS: another cap for every group (a power of
 * two), for tests of a group run dry; 0 when unset or not one. */
static unsigned cap_from_env(void) {
  const char *v = taxi__secure_getenv("TAXI_PROACTOR_DGRAM_BUFFERS");
  if (!v || !*v) return 0;
  char *end = NULL;
  unsigned long n = strtoul(v, &end, 10);
  if (*end || n == 0 || n > RING_MAX || (n & (n - 1))) return 0;
  return (unsigned)n;
}

static unsigned group_max(const taxi_proactor_t *p, unsigned g) {
  return p->dgroups_max ? p->dgroups_max : group_cap[g];
}

void taxi__pgroups_open(taxi_proactor_t *p) {
  /* Only where the backend chooses the pool's buffers and can read a
   * datagram in one (dgram_unpack): the groups serve nothing else. */
  if (!p->bufs || !p->bufs->native || !p->ops->dgram_unpack) return;
  p->dgroups_max = cap_from_env();
  for (unsigned g = 1; g < TAXI__BUF_GROUPS; g++)
    if (p->ops->buf_open(p->backend, g, group_max(p, g), group_size(g)) == 0)
      p->dgroups_open |= 1u << g;
}

int taxi__proactor_dgram_group(taxi_proactor_t *p, size_t recv_size,
                               unsigned *group) {
  if (!p || !group)
    return taxi__refuse(TAXI_EINVAL, "taxi__proactor_dgram_group: %s: NULL",
                        p ? "group" : "p");
  unsigned g = 1;
  while (g < TAXI__BUF_GROUPS && group_payload[g] < recv_size) g++;
  if (g == TAXI__BUF_GROUPS) return TAXI_ENOTSUP;
  int rc = 0;
  taxi__mutex_lock(&p->lock);
  if (!(p->dgroups_open & (1u << g))) {
    rc = TAXI_ENOTSUP;
  } else if (!p->dgroups[g]) {
    unsigned max = group_max(p, g);
    taxi__pbufs_t *b = taxi__pbufs_new(g, group_size(g), max, true);
    if (!b || taxi__pbufs_fill_locked(
                  p, b, GROUP_FIRST < max ? GROUP_FIRST : max) < 0) {
      /* None of its buffers was given to the backend: the fill makes
       * its chunk before it gives any. */
      taxi__pbufs_free(b);
      rc = TAXI_ENOMEM;
    } else {
      p->dgroups[g] = b;
    }
  }
  taxi__mutex_unlock(&p->lock);
  if (rc == 0) *group = g;
  return rc;
}
