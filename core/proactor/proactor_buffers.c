/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_buffers.c - layer 1, the groups of buffers of
 * pooled reads: the pool (taxi_proactor_read_pooled), made with the
 * proactor, and the groups of datagram receives sized for them
 * (core/proactor/proactor_groups.c), made on first use; a buffer is lent
 * to a completion handler with the bytes that arrived and given back by
 * taxi_proactor_buffer_release (core/proactor/proactor.c), which finds
 * its group from its address.
 *
 * It calls core/common and the backend's buf_open/buf_give, and no other
 * file of core/proactor/.  When a freed buffer lets a read waiting for one
 * go on, the read's deadline is set and the function returns true: the
 * caller's layer has the waiting threads woken (p->wake_wanted, or a kick
 * from the life cycle), which this layer may not do itself.
 *
 * Two ways to fill a buffer, chosen once, when the pool is made (a
 * datagram group is made only where the backend chooses):
 *  - the backend chooses (io_uring's ring of provided buffers): every free
 *    buffer is the backend's (buf_give), a completion names the one the
 *    kernel filled, and a release gives it back to the backend;
 *  - the core chooses: free buffers wait on a stack here, a read takes one
 *    when it is submitted (an ordinary READ into it) and gives it back if
 *    no bytes came.
 * Either way `held` marks the buffers the application holds, so that a
 * release of one it does not hold (twice, or one never lent) is refused
 * instead of corrupting the pool.
 *
 * Growth.  A read that finds no buffer doubles its group while it is
 * below its cap: a new chunk as big as the group so far, so the steady
 * state allocates nothing and a buffer's id is found from its address by
 * chunk.  At the cap the read waits on the paused list (no deadline)
 * until a release of a buffer of its group wakes it.  Ids are never
 * reused for another address.
 *
 * Locking: the proactor's lock, like everything in
 * core/proactor/proactor_impl.h.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/proactor/proactor_impl.h"
#include "core/proactor/proactor_op.h"

#include <inttypes.h>
#include <string.h>

#define POOL_DEFAULT_SIZE 4096u
#define POOL_MAX_SIZE (1024u * 1024u)
#define POOL_MAX_COUNT 32768u

static bool power_of_two(unsigned n) { return n && !(n & (n - 1)); }

#define WHERE "taxi_proactor_create: options"

int taxi__pbufs_check(const taxi_proactor_options_t *o) {
  if (o->buffer_count == 0) {
    if (o->buffer_max || o->buffer_size)
      return taxi__refuse(
          TAXI_EINVAL,
          WHERE
          ".%s: set without buffer_count, which makes "
          "the pool; got %" PRIu64,
          o->buffer_max ? "buffer_max" : "buffer_size",
          o->buffer_max ? (uint64_t)o->buffer_max : (uint64_t)o->buffer_size);
    return 0;
  }
  unsigned max = o->buffer_max ? o->buffer_max : o->buffer_count;
  if (!power_of_two(o->buffer_count) || o->buffer_count > POOL_MAX_COUNT)
    return taxi__refuse(TAXI_EINVAL,
                        WHERE ".buffer_count: a power of two up to %u; got %u",
                        POOL_MAX_COUNT, o->buffer_count);
  if (!power_of_two(max) || max < o->buffer_count || max > POOL_MAX_COUNT)
    return taxi__refuse(TAXI_EINVAL,
                        WHERE
                        ".buffer_max: 0, or a power of two from "
                        "buffer_count (%u) up to %u; got %u",
                        o->buffer_count, POOL_MAX_COUNT, o->buffer_max);
  if (o->buffer_size > POOL_MAX_SIZE)
    return taxi__refuse(TAXI_EINVAL,
                        WHERE ".buffer_size: at most %u; got %" PRIu64,
                        POOL_MAX_SIZE, (uint64_t)o->buffer_size);
  return 0;
}

/* Make buffers [count, count + n) of b in a new chunk and free them. */
static int pool_add_locked(taxi_proactor_t *p, taxi__pbufs_t *b, unsigned n) {
  if (b->nchunks == TAXI__PBUF_CHUNKS) return TAXI_ENOMEM;
  unsigned char *mem = taxi__malloc((size_t)n * b->size);
  if (!mem) return TAXI_ENOMEM;
  unsigned first = b->count;
  b->chunk[b->nchunks] = mem;
  b->chunk_first[b->nchunks] = first;
  b->nchunks++;
  b->count += n;
  for (unsigned i = 0; i < n; i++) {
    if (b->native)
      p->ops->buf_give(p->backend, b->group, first + i,
                       mem + (size_t)i * b->size);
    else
      b->free[b->nfree++] = first + i;
  }
  return 0;
}

taxi__pbufs_t *taxi__pbufs_new(unsigned group, size_t size, unsigned max,
                               bool native) {
  taxi__pbufs_t *b = taxi__calloc(1, sizeof *b);
  if (!b) return NULL;
  b->group = group;
  b->size = size;
  b->max = max;
  b->native = native;
  b->held = taxi__calloc(max, sizeof *b->held);
  /* Free ids are kept here only where the core chooses. */
  b->free = native ? NULL : taxi__calloc(max, sizeof *b->free);
  if (!b->held || (!native && !b->free)) {
    taxi__pbufs_free(b);
    return NULL;
  }
  return b;
}

void taxi__pbufs_free(taxi__pbufs_t *b) {
  if (!b) return;
  for (unsigned i = 0; i < b->nchunks; i++) taxi__free(b->chunk[i]);
  taxi__free(b->held);
  taxi__free(b->free);
  taxi__free(b);
}

int taxi__pbufs_fill_locked(taxi_proactor_t *p, taxi__pbufs_t *b,
                            unsigned count) {
  return pool_add_locked(p, b, count);
}

int taxi__pbufs_open(taxi_proactor_t *p, const taxi_proactor_options_t *o) {
  if (o->buffer_count == 0) return 0;
  size_t size = o->buffer_size ? o->buffer_size : POOL_DEFAULT_SIZE;
  unsigned max = o->buffer_max ? o->buffer_max : o->buffer_count;
  bool native = p->ops->buf_open && p->ops->buf_give &&
                p->ops->buf_open(p->backend, 0, max, size) == 0;
  p->bufs = taxi__pbufs_new(0, size, max, native);
  if (!p->bufs) return TAXI_ENOMEM;
  return pool_add_locked(p, p->bufs, o->buffer_count);
}

void taxi__pbufs_close(taxi_proactor_t *p) {
  for (unsigned g = 1; g < TAXI__BUF_GROUPS; g++) {
    taxi__pbufs_free(p->dgroups[g]);
    p->dgroups[g] = NULL;
  }
  taxi__pbufs_free(p->bufs);
  p->bufs = NULL;
}

void *taxi__pbufs_addr(const taxi__pbufs_t *b, unsigned id) {
  unsigned c = b->nchunks;
  while (c > 0 && b->chunk_first[c - 1] > id) c--;
  if (c == 0 || id >= b->count) return NULL;
  return b->chunk[c - 1] + (size_t)(id - b->chunk_first[c - 1]) * b->size;
}

/* The id of b's buffer at `addr` (inner: or anywhere inside it), or -1. */
static long pool_id(const taxi__pbufs_t *b, const void *addr, bool inner) {
  /* As integers: the pointer may be any object's, which C does not let
   * one compare with a chunk's. */
  uintptr_t a = (uintptr_t)addr;
  for (unsigned c = 0; c < b->nchunks; c++) {
    unsigned n = (c + 1 < b->nchunks ? b->chunk_first[c + 1] : b->count) -
                 b->chunk_first[c];
    uintptr_t lo = (uintptr_t)b->chunk[c];
    if (a < lo || a - lo >= (uintptr_t)n * b->size) continue;
    size_t off = (size_t)(a - lo);
    if (off % b->size && !inner) return -1;
    return (long)(b->chunk_first[c] + off / b->size);
  }
  return -1;
}

int taxi__pbufs_grow_locked(taxi_proactor_t *p, taxi__pbufs_t *b) {
  if (b->count >= b->max) return TAXI_ENOMEM;
  unsigned n = b->count <= b->max - b->count ? b->count : b->max - b->count;
  int rc = pool_add_locked(p, b, n);
  if (rc == 0) p->stats.buffer_grows++;
  return rc;
}

bool taxi__pbufs_take_locked(taxi_proactor_t *p, unsigned *id) {
  taxi__pbufs_t *b = p->bufs;
  /* A growth adds at least one free buffer. */
  if (b->nfree == 0 && taxi__pbufs_grow_locked(p, b) < 0) return false;
  *id = b->free[--b->nfree];
  return true;
}

/* A free buffer of b, back to whoever chooses.  true when a read waiting
 * for a buffer of b may go on (its deadline is now). */
static bool pool_free_locked(taxi_proactor_t *p, taxi__pbufs_t *b,
                             unsigned id) {
  if (b->native)
    p->ops->buf_give(p->backend, b->group, id, taxi__pbufs_addr(b, id));
  else
    b->free[b->nfree++] = id;
  /* One read waiting for a buffer of this group may go on. */
  for (taxi_op_t *op = p->paused.head; op; op = op->internal_.next) {
    if ((op->internal_.flags & TAXI__READ_POOLED) &&
        taxi__op_buf_group(op) == b->group &&
        op->internal_.deadline == INT64_MAX) {
      op->internal_.deadline = 0;
      return true;
    }
  }
  return false;
}

bool taxi__pbufs_unused_locked(taxi_proactor_t *p, taxi__pbufs_t *b,
                               unsigned id) {
  return pool_free_locked(p, b, id);
}

void taxi__pbufs_lend_locked(taxi__pbufs_t *b, unsigned id, bool inner) {
  b->held[id] = inner ? 2 : 1;
  b->nheld++;
}

int taxi__pbufs_release_locked(taxi_proactor_t *p, void *data, bool *wake) {
  *wake = false;
  /* The group whose chunks hold the address: the pool, or a datagram
   * size's (whose buffers are all datagrams', op->data inside one). */
  for (unsigned g = 0; g < TAXI__BUF_GROUPS; g++) {
    taxi__pbufs_t *b = g == 0 ? p->bufs : p->dgroups[g];
    if (!b) continue;
    long id = pool_id(b, data, false);
    if (id < 0) {
      id = pool_id(b, data, true);
      if (id < 0) continue;
      if (b->held[id] == 1) return TAXI_EINVAL;
    }
    if (!b->held[id]) return TAXI_ENOENT;
    b->held[id] = 0;
    b->nheld--;
    *wake = pool_free_locked(p, b, (unsigned)id);
    return 0;
  }
  return TAXI_EINVAL;
}
