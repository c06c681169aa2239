/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_more.c - layer 4 (see proactor_impl.h): taking a
 * multishot pooled receive's reported datagrams inside its handler, and
 * giving their buffers back together (core/proactor/proactor_more.h).
 */
#include "config.h"

#include "core/proactor/proactor_more.h"
#include "core/proactor/proactor_impl.h"

bool taxi__proactor_next_dgram(taxi_proactor_t *p, taxi_op_t *op,
                               size_t *bytes) {
  if (!p || !op || !bytes) return false;
  taxi__mutex_lock(&p->lock);
  bool taken = taxi__proactor_next_dgram_locked(p, op, bytes);
  taxi__mutex_unlock(&p->lock);
  return taken;
}

void taxi__proactor_buffers_release(taxi_proactor_t *p, void *const *bufs,
                                    unsigned n) {
  if (!p || !bufs || n == 0) return;
  bool wake = false;
  taxi__mutex_lock(&p->lock);
  for (unsigned i = 0; i < n; i++)
    if (bufs[i]) (void)taxi__pbufs_release_locked(p, bufs[i], &wake);
  /* A read waiting for a buffer may go on: the waiting threads look. */
  if (wake) taxi__proactor_kick_locked(p);
  taxi__mutex_unlock(&p->lock);
}
