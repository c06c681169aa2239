/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_bufring.c - the io_uring backend's ring of provided
 * buffers (docs/backends/uring.md, "Pooled reads"): the proactor's
 * buffer pool registered as buffer group 0, and the groups of datagram
 * receives as groups 1 and up, so that a pooled read lets the kernel pick
 * the buffer.  Without liburing 2.3's helpers, none: the core picks the
 * buffers (and the datagram groups are not made).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* cpu_set_t in liburing.h */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include <limits.h>
#include <string.h>
#include <sys/mman.h>

/* The ring of provided buffers, registered while the ring may still be
 * registered with by any thread (before a one-thread ring is enabled:
 * the proactor is being made).  Its memory must be page-aligned. */
#ifdef URING_HAVE_BUF_RING
int uring_buf_open(void *state, unsigned group, unsigned max, size_t size) {
  uring_state_t *s = state;
  /* The kernel's lengths of a provided buffer are 32 bits. */
  if (!s->has_recv_multishot || group >= TAXI__BUF_GROUPS ||
      s->br[group].ring || size > UINT32_MAX)
    return TAXI_ENOTSUP;
  size_t bytes = (size_t)max * sizeof(struct io_uring_buf);
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  count_syscall(s);
  if (mem == MAP_FAILED) return TAXI_ENOTSUP; /* the core chooses then */
  struct io_uring_buf_reg reg;
  memset(&reg, 0, sizeof reg);
  reg.ring_addr = (uint64_t)(uintptr_t)mem;
  reg.ring_entries = max;
  reg.bgid = (__u16)group;
  io_uring_buf_ring_init(mem);
  count_syscall(s);
  if (io_uring_register_buf_ring(&s->ring, &reg, 0) < 0) {
    munmap(mem, bytes);
    count_syscall(s);
    return TAXI_ENOTSUP;
  }
  s->br[group].ring = mem;
  s->br[group].entries = max;
  s->br[group].bytes = bytes;
  s->br[group].buf_size = size;
  return 0;
}

/* A multishot IORING_OP_RECVMSG writes into the buffer it picks the
 * kernel's header, then the sender's address in the room the request's
 * msghdr asked for (msg_namelen: op->peer's size), then the payload
 * (liburing's io_uring_recvmsg_* helpers read that layout).  The payload
 * is cut where the buffer ends, which the header's flags tell
 * (MSG_TRUNC). */
int uring_dgram_unpack(void *state, taxi_op_t *op, const unsigned char *buf,
                       size_t used, size_t *offset, size_t *len) {
  (void)state;
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_namelen = (socklen_t)sizeof op->peer;
  if (used > INT_MAX) return TAXI_ESYS;
  struct io_uring_recvmsg_out *o =
      io_uring_recvmsg_validate((void *)(uintptr_t)buf, (int)used, &mh);
  if (!o) return TAXI_ESYS;
  unsigned nlen =
      o->namelen < sizeof op->peer ? o->namelen : (unsigned)sizeof op->peer;
  memcpy(op->peer, io_uring_recvmsg_name(o), nlen);
  op->peer_len = nlen;
  op->msg_flags = (o->flags & MSG_TRUNC) ? TAXI_MSG_TRUNCATED : 0u;
  const unsigned char *payload = io_uring_recvmsg_payload(o, &mh);
  *offset = (size_t)(payload - buf);
  *len = io_uring_recvmsg_payload_length(o, (int)used, &mh);
  return 0;
}

/* Publish one free buffer to the kernel: memory only, so any thread may
 * (under the mutex: the ring's tail has one producer). */
void uring_buf_give(void *state, unsigned group, unsigned id, void *addr) {
  uring_state_t *s = state;
  struct uring_bufring *b = &s->br[group];
  taxi__mutex_lock(&s->lock);
  io_uring_buf_ring_add(b->ring, addr, (unsigned)b->buf_size,
                        (unsigned short)id, io_uring_buf_ring_mask(b->entries),
                        0);
  io_uring_buf_ring_advance(b->ring, 1);
  taxi__mutex_unlock(&s->lock);
}
#else
int uring_buf_open(void *state, unsigned group, unsigned max, size_t size) {
  (void)state;
  (void)group;
  (void)max;
  (void)size;
  return TAXI_ENOTSUP;
}

void uring_buf_give(void *state, unsigned group, unsigned id, void *addr) {
  (void)state;
  (void)group;
  (void)id;
  (void)addr;
}

int uring_dgram_unpack(void *state, taxi_op_t *op, const unsigned char *buf,
                       size_t used, size_t *offset, size_t *len) {
  (void)state;
  (void)op;
  (void)buf;
  (void)used;
  (void)offset;
  (void)len;
  return TAXI_ESYS; /* never asked: buf_open said the core chooses */
}
#endif

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_bufring_absent;
#endif /* TAXI_HAVE_URING */
