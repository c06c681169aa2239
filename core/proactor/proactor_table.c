/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_table.c - layer 1, the operations table: a row per
 * attached handle (its two queues of operations), the timer heap, the
 * paused list, and the loop's list of rows whose head left.
 *
 * Bookkeeping only: nothing here submits, completes or wakes anyone.  It
 * calls core/common, ports/ and the backend's table (attach, adopt,
 * release), and no other file of core/proactor/ (see the layering in
 * core/proactor/proactor_impl.h).
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/alloc.h"
#include "core/common/time_math.h"

#include <string.h>

/* ---- rows --------------------------------------------------------------- */

static int row_alloc_locked(taxi_proactor_t *p, uint32_t *row) {
  if (p->free_head != TAXI__ROW_NIL) {
    *row = p->free_head;
    p->free_head = p->rows[*row].next_free;
    return 0;
  }
  if (p->nrows == p->rows_cap) {
    uint32_t ncap = p->rows_cap ? p->rows_cap * 2 : 16;
    if (ncap >= TAXI__ROW_NIL) return TAXI_ENOMEM;
    taxi__prow_t *n = taxi__reallocarray(p->rows, ncap, sizeof *n);
    if (!n) return TAXI_ENOMEM;
    p->rows = n;
    p->rows_cap = ncap;
  }
  *row = p->nrows++;
  memset(&p->rows[*row], 0, sizeof p->rows[*row]);
  return 0;
}

void taxi__proactor_row_release_locked(taxi_proactor_t *p, size_t row) {
  taxi__prow_t *r = &p->rows[row];
  /* `used`: the backend's attach succeeded (a row given back by a failed
   * attach never reached it). */
  if (r->used && p->ops->release) p->ops->release(p->backend, r->handle);
  if (r->close_pending) taxi__close(r->handle);
  memset(r, 0, sizeof *r);
  r->handle = TAXI_INVALID_HANDLE;
  r->next_free = p->free_head;
  p->free_head = (uint32_t)row;
}

int taxi__proactor_attach_locked(taxi_proactor_t *p, taxi_handle_t h) {
  uint32_t row, dummy;
  if (taxi__handle_map_get(&p->map, h, &dummy) == 0) return TAXI_EEXIST;
  int rc = taxi__handle_check(h);
  if (rc < 0) return rc;
  rc = row_alloc_locked(p, &row);
  if (rc < 0) return rc;
  rc = taxi__handle_map_put(&p->map, h, row);
  if (rc < 0) goto fail_row;
  rc = p->ops->attach(p->backend, h);
  if (rc < 0) goto fail_map;
  taxi__prow_t *r = &p->rows[row];
  memset(r, 0, sizeof *r);
  r->handle = h;
  r->used = true;
  return 0;

fail_map:
  taxi__handle_map_del(&p->map, h);
fail_row:
  taxi__proactor_row_release_locked(p, row);
  return rc;
}

void taxi__proactor_adopt_locked(taxi_proactor_t *p, taxi_handle_t h) {
  uint32_t row;
  if (taxi__handle_map_get(&p->map, h, &row) < 0) return;
  taxi__prow_t *r = &p->rows[row];
  if (r->made) return;
  r->made = true;
  if (p->ops->adopt) p->ops->adopt(p->backend, h);
}

/* ---- rows whose head left, for the loop --------------------------------- */

void taxi__proactor_due_push_locked(taxi_proactor_t *p, size_t row) {
  taxi__prow_t *r = &p->rows[row];
  if (r->due) return;
  r->due = true;
  r->next_due = TAXI__ROW_NIL;
  if (p->due_head == TAXI__ROW_NIL)
    p->due_head = (uint32_t)row;
  else
    p->rows[p->due_tail].next_due = (uint32_t)row;
  p->due_tail = (uint32_t)row;
}

uint32_t taxi__proactor_due_pop_locked(taxi_proactor_t *p) {
  uint32_t row = p->due_head;
  if (row == TAXI__ROW_NIL) return row;
  taxi__prow_t *r = &p->rows[row];
  p->due_head = r->next_due;
  r->due = false;
  r->next_due = TAXI__ROW_NIL;
  return row;
}

/* ---- timers ------------------------------------------------------------- */

/* The timer heap's view of a timer operation: by deadline, then as
 * scheduled (the sequence is kept in `offset`, unused by timers).  Out of
 * the heap its index is TAXI__NOT_IN_HEAP, the same value as TAXI__NO_ROW
 * (heap_index is the row of the operations that are not timers). */
static bool op_before(const void *a, const void *b) {
  const taxi_op_t *x = a, *y = b;
  if (x->internal_.deadline != y->internal_.deadline)
    return x->internal_.deadline < y->internal_.deadline;
  return x->internal_.offset < y->internal_.offset;
}

static size_t *op_index(void *op) {
  return &((taxi_op_t *)op)->internal_.heap_index;
}

const taxi__timer_heap_ops_t taxi__proactor_timer_ops = {op_before, op_index};

void taxi__proactor_timer_push_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__op_set_phase(op, TAXI__OP_TIMER);
  taxi__timer_heap_push(&p->timers, op);
}

void taxi__proactor_timer_remove_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi__timer_heap_remove(&p->timers, op); /* index: TAXI__NOT_IN_HEAP */
}

/* ---- the paused list ---------------------------------------------------- */

void taxi__proactor_unpause_locked(taxi_proactor_t *p, taxi_op_t *op) {
  taxi_op_t *prev = NULL;
  for (taxi_op_t *o = p->paused.head; o; prev = o, o = o->internal_.next) {
    if (o != op) continue;
    if (prev)
      prev->internal_.next = o->internal_.next;
    else
      p->paused.head = o->internal_.next;
    if (p->paused.tail == o) p->paused.tail = prev;
    o->internal_.next = NULL;
    break;
  }
  taxi__op_set_phase(op, TAXI__OP_SUBMITTED);
}

/* op joins the paused list until `deadline`. */
static void paused_push_locked(taxi_proactor_t *p, taxi_op_t *op,
                               taxi_time_t deadline) {
  op->internal_.deadline = deadline;
  taxi__op_set_phase(op, TAXI__OP_PAUSED);
  taxi__opq_push(&p->paused, op);
}

void taxi__proactor_pause_locked(taxi_proactor_t *p, taxi_op_t *op,
                                 taxi_time_t pause, const char *where, int code,
                                 unsigned attempt) {
  paused_push_locked(p, op, taxi__time_add(taxi_now(), pause));
  p->pause_report = true;
  p->pause_report_where = where;
  p->pause_report_code = code;
  p->pause_report_handle = op->handle;
  p->pause_report_attempt = attempt;
}

void taxi__proactor_starve_locked(taxi_proactor_t *p, taxi_op_t *op) {
  /* No deadline: a release sets one (core/proactor/proactor_buffers.c). */
  paused_push_locked(p, op, INT64_MAX);
  p->stats.buffer_waits++;
}
