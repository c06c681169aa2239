/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/dgram_plain.c - prepared datagram receives (ports/sock.h) where
 * there is nothing to prepare: without recvmmsg (Windows, and POSIX
 * systems other than Linux) a receive takes one datagram per call, whose
 * header costs next to nothing to fill, so a prepared batch is its
 * records alone and a prepared receive is taxi__sock_recv_batch.  Linux
 * builds its headers once: ports/posix/dgram.c.
 */
#include "config.h"

#if !defined(__linux__)

#if defined(_WIN32)
#include "win32/win32_impl.h"
#endif

#include "sock.h"

struct taxi__recv_prep {
  taxi__dgram_msg_t *m;
  unsigned n;
};

size_t taxi__sock_recv_prep_size(unsigned n) {
  (void)n;
  return sizeof(struct taxi__recv_prep);
}

taxi__recv_prep_t *taxi__sock_recv_prepare(void *mem, taxi__dgram_msg_t *m,
                                           unsigned n) {
  struct taxi__recv_prep *p = mem;
  p->m = m;
  p->n = n;
  return p;
}

int taxi__sock_recv_prepared(taxi_handle_t s, taxi__recv_prep_t *p) {
  return taxi__sock_recv_batch(s, p->m, p->n);
}

#else
typedef int taxi__dgram_plain_unused; /* ISO C: no empty translation unit */
#endif
