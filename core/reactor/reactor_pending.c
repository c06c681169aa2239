/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_pending.c - the error pending on a registered handle, as
 * a hook asks for it (taxi_reactor_pending_error).
 *
 * A backend with TAXI__EXT_EVENT_ERROR reports a socket's error with the
 * event and the reactor keeps it in the handle's slot: on kqueue the error
 * arrives in the event (EV_EOF, fflags), and libkqueue reads it with
 * SO_ERROR, which clears it, so the socket itself no longer has it.  Other
 * backends leave it on the socket, where SO_ERROR finds it.
 */
#include "config.h"

#include "core/reactor/reactor_impl.h"
#include "ports/sock.h"

int taxi_reactor_pending_error(taxi_reactor_t *r, taxi_handler_t *h,
                               int *error) {
  if (!r || !h || !error) return TAXI_EINVAL;
  *error = 0;
  taxi__mutex_lock(&r->lock);
  if (!(h->internal_.flags & TAXI__H_ATTACHED) || h->internal_.reactor != r ||
      !(h->internal_.flags & TAXI__H_HAS_HANDLE)) {
    taxi__mutex_unlock(&r->lock);
    return TAXI_ENOENT;
  }
  taxi__slot_t *s = &r->slots[h->internal_.slot];
  taxi_handle_t handle = s->handle;
  int kept = s->error;
  s->error = 0;
  taxi__mutex_unlock(&r->lock);
  if (kept) {
    *error = kept;
    return 0;
  }
  return taxi__sock_pending_error(handle, error);
}
