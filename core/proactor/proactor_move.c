/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_move.c - taxi_proactor_move(): hand an idle attached
 * handle from one proactor to another (how a group of proactors, one per
 * thread, spreads its connections: taxi/proactor_group.h).
 *
 * The two proactors' locks are never held at once: a move the other way
 * in another thread would take them in the other order.  So the handle is
 * attached to `to` first and forgotten by `from` afterwards, each under
 * its own lock.  In between it is attached to both, which no backend minds
 * (an attach only prepares the descriptor and keeps a record of it; no
 * request names it); and if `from` refuses at the second look (an
 * operation started on it meanwhile, or it was closed), the attach to `to`
 * is undone, which cannot fail.  The other order (detach, then attach)
 * would have to attach back to `from` after a failed attach to `to`, and
 * that attach may fail too (memory), losing the handle.
 *
 * Layer 5, above the core (see core/proactor/proactor_impl.h): it calls
 * the table (attach, adopt) and the life cycle (forget) in proactor.c.
 */
#include "config.h"

#include "core/proactor/proactor_impl.h"
#include "core/common/detail.h"

/* 0 when h is attached to p and no operation on it is in flight (none
 * submitted, pausing, or waiting in either direction); else TAXI_ENOENT or
 * TAXI_EBUSY.  *row is its row.  p->lock held. */
static int idle_row_locked(taxi_proactor_t *p, taxi_handle_t h, uint32_t *row) {
  if (taxi__handle_map_get(&p->map, h, row) < 0) return TAXI_ENOENT;
  const taxi__prow_t *r = &p->rows[*row];
  /* A zombie row is out of the map; checked all the same, since moving a
   * handle whose requests may still be in the backend would let them
   * complete for a handle another proactor now owns. */
  if (!r->used || r->zombie) return TAXI_ENOENT;
  for (unsigned d = 0; d < 2; d++)
    if (r->dir[d].cur || r->dir[d].wait.head)
      return taxi__refuse(TAXI_EBUSY,
                          "taxi_proactor_move: h: operations on it are in "
                          "flight (or queued): move it once they have "
                          "completed");
  return 0;
}

/* Check h on `from` under its lock, without changing anything; *made:
 * whether `from` made it (it stays the proactors' own where it goes). */
static int check_from(taxi_proactor_t *from, taxi_handle_t h, bool *made) {
  uint32_t row;
  taxi__mutex_lock(&from->lock);
  int rc = from->destroying ? TAXI_ESTOPPED : idle_row_locked(from, h, &row);
  *made = rc == 0 && from->rows[row].made;
  taxi__mutex_unlock(&from->lock);
  return rc;
}

int taxi_proactor_move(taxi_proactor_t *from, taxi_handle_t h,
                       taxi_proactor_t *to) {
  if (!from || !to || from == to || h == TAXI_INVALID_HANDLE)
    return TAXI_EINVAL;
  /* IOCP: the handle stays bound to from's completion port until closed;
   * its completions could never reach `to`. */
  if ((from->ops->caps | to->ops->caps) & TAXI__PCAP_NO_MOVE)
    return taxi__refuse(
        TAXI_ENOTSUP,
        "taxi_proactor_move: h: the %s backend keeps a "
        "handle bound to its port until closed",
        from->ops->caps & TAXI__PCAP_NO_MOVE ? from->name : to->name);

  /* First look: the errors about `from` come before those about `to`, and
   * nothing is attached to `to` for a handle that cannot move. */
  bool made;
  int rc = check_from(from, h, &made);
  if (rc < 0) return rc;

  taxi__mutex_lock(&to->lock);
  rc = to->destroying ? TAXI_ESTOPPED : taxi__proactor_attach_locked(to, h);
  if (rc == 0 && made) taxi__proactor_adopt_locked(to, h);
  taxi__mutex_unlock(&to->lock);
  if (rc < 0) return rc;

  /* Second look, then forget h here.  With every queue empty, forgetting
   * cancels nothing, so the row is freed at once, and the backend's detach
   * only drops its record (io_uring has none: requests name the
   * descriptor, and none of h is in flight).  The descriptor stays open. */
  uint32_t row;
  taxi__mutex_lock(&from->lock);
  rc = from->destroying ? TAXI_ESTOPPED : idle_row_locked(from, h, &row);
  if (rc == 0) taxi__proactor_forget_locked(from, h, false);
  taxi__mutex_unlock(&from->lock);
  if (rc == 0) return 0;

  /* Undo: the row was made above; forgetting it cannot fail. */
  taxi__mutex_lock(&to->lock);
  taxi__proactor_forget_locked(to, h, false);
  taxi__mutex_unlock(&to->lock);
  return rc;
}
