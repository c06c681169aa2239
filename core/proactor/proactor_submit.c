/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_submit.c - layer 2, submission: give the head of a
 * handle's queue to the backend, with a buffer of the pool for a pooled
 * read the core chooses for, or pause it when the OS refuses it for now.
 *
 * It calls the table and the buffer pool (layer 1), core/common and the
 * backend's submit; never the completion layer (proactor_complete.c),
 * which never calls it either: a refusal is returned for the caller, in
 * the loop or a start, to complete the operation with.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/proactor/proactor_op.h"

/* A pooled read the core chooses the buffer for: a free one, as its one
 * buffer (its id in internal_.offset, which a READ does not use).  false
 * when none is left. */
static bool pooled_take_locked(taxi_proactor_t *p, taxi_op_t *op) {
  unsigned id;
  if (!taxi__pbufs_take_locked(p, &id)) return false;
  op->internal_.bufs[0].base = taxi__pbufs_addr(p->bufs, id);
  op->internal_.bufs[0].len = p->bufs->size;
  op->internal_.nbufs = 1;
  op->internal_.total = p->bufs->size;
  op->internal_.done = 0;
  op->internal_.offset = id;
  return true;
}

int taxi__proactor_submit_locked(taxi_proactor_t *p, taxi_op_t *op) {
  unsigned before = op->internal_.state;
  bool took = false;
  if ((op->internal_.flags & (TAXI__READ_POOLED | TAXI__READ_SELECT)) ==
      TAXI__READ_POOLED) {
    if (!pooled_take_locked(p, op)) return TAXI__NO_BUFFER;
    took = true;
  }
  /* A read the backend picks a buffer for moves no bytes into a buffer of
   * its own: `total` keeps its group's size at its submission, which
   * tells its ENOBUFS whether the group grew since (pooled_result_locked). */
  if (op->internal_.flags & TAXI__READ_SELECT)
    op->internal_.total = taxi__pbufs_of(p, op)->count;
  taxi__op_state_store(
      op, (before & ~TAXI__OP_STATE) | TAXI__OP_SUBMITTED | TAXI__OP_INBACKEND);
  p->in_backend++;
  p->stats.submissions++;
  int rc = p->ops->submit(p->backend, op);
  if (rc == 0) return 0;
  taxi__op_state_store(op, before);
  p->in_backend--;
  if (took &&
      taxi__pbufs_unused_locked(p, p->bufs, (unsigned)op->internal_.offset))
    p->wake_wanted = true;
  return rc < 0 ? rc : TAXI_ESYS;
}

int taxi__proactor_submit_or_pause_locked(taxi_proactor_t *p, taxi_op_t *op) {
  int rc = taxi__proactor_submit_locked(p, op);
  if (rc == 0) {
    taxi__backoff_reset(&p->submit_backoff);
    return 0;
  }
  if (rc == TAXI__NO_BUFFER) {
    taxi__proactor_starve_locked(p, op);
    return 0;
  }
  if (rc != TAXI_EAGAIN) return rc;
  taxi_time_t pause = taxi__backoff_failed(&p->submit_backoff);
  if (pause < 0) {
    /* Refused too long: the refusal is the operation's result. */
    taxi__backoff_reset(&p->submit_backoff);
    return rc;
  }
  p->stats.submit_pauses++;
  taxi__proactor_pause_locked(p, op, pause, "submit", rc,
                              p->submit_backoff.failures);
  return 0;
}
