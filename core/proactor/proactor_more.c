/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_more.c - layer 4 (see proactor_impl.h): taking a
 * multishot pooled receive's reported datagrams inside its handler
 * (core/proactor/proactor_more.h).
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
