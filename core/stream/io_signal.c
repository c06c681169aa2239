/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_signal.c - the application's signal callbacks: which
 * signal calls what, added to or removed from the dispatcher through the
 * driver's table, and run (io->ops->signal, from the driver) under the
 * context's cb_lock, which its posts take too.  Calls nothing of the wing
 * by name.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/io_impl.h"

void taxi__io_signal(taxi_io_t *io, int signo) {
  if (signo <= 0 || signo >= TAXI__IO_SIGNALS) return;
  taxi__mutex_lock(&io->lock);
  taxi_io_signal_fn fn = io->sig[signo].fn;
  void *arg = io->sig[signo].arg;
  taxi__mutex_unlock(&io->lock);
  if (!fn) return;
  taxi__mutex_lock(&io->cb_lock); /* never beside a post (post.c) */
  fn(io, signo, arg);
  taxi__mutex_unlock(&io->cb_lock);
}

int taxi_io_on_signal(taxi_io_t *io, int signo, taxi_io_signal_fn fn,
                      void *arg) {
  if (!io) return taxi__refuse(TAXI_EINVAL, "taxi_io_on_signal: io: NULL");
  if (signo <= 0 || signo >= TAXI__IO_SIGNALS)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_on_signal: signo: 1 to %d; got %d",
                        TAXI__IO_SIGNALS - 1, signo);
  taxi__mutex_lock(&io->lock);
  bool had = io->sig[signo].fn != NULL;
  taxi__mutex_unlock(&io->lock);
  int rc = 0;
  unsigned mark = taxi__refusals();
  if (!fn) {
    if (!had) return TAXI_ENOENT;
    rc = io->drv->remove_signal(io, signo);
  } else if (!had) {
    rc = io->drv->add_signal(io, signo);
  }
  /* The dispatcher's refusal (a signal another reactor owns) is ours. */
  rc = taxi__refuse_within(rc, mark,
                           io->proactor ? "taxi_proactor_add_signal: signo"
                                        : "taxi_reactor_add_signal: signo",
                           "taxi_io_on_signal: signo");
  if (rc < 0) return rc;
  taxi__mutex_lock(&io->lock);
  io->sig[signo].fn = fn;
  io->sig[signo].arg = fn ? arg : NULL;
  taxi__mutex_unlock(&io->lock);
  return 0;
}
