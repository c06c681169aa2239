/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/io_timer.c - application timers of an I/O context: allocated
 * once, armed and disarmed by the driver (a reactor timer, or a proactor timer
 * operation) without allocating.  The driver tells it through t->ops,
 * installed here.  Calls io_lists.c, io_options.c and the driver through
 * its table.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/stream/io_impl.h"
#include "core/common/detail.h"

#include <inttypes.h>

/* What the driver reports of a timer, and how taxi_io_destroy destroys
 * one. */
static const taxi__timer_ops_t timer_ops = {
    .close = taxi_io_timer_destroy,
    .fire = taxi__timer_fire,
    .free = taxi__timer_free,
};

int taxi_io_timer_create(taxi_io_timer_t **out, taxi_io_t *io,
                         taxi_io_timer_fn fn, void *arg) {
  if (!io || !out || !fn)
    return taxi__refuse(TAXI_EINVAL, "taxi_io_timer_create: %s: NULL",
                        !out  ? "out"
                        : !io ? "io"
                              : "fn");
  taxi_io_timer_t *t = taxi__calloc(1, sizeof *t);
  if (!t) return TAXI_ENOMEM;
  t->io = io;
  t->ops = &timer_ops;
  t->fn = fn;
  t->arg = arg;
  int rc = taxi__mutex_init(&t->lock);
  if (rc < 0) {
    taxi__free(t);
    return rc;
  }
  rc = taxi__io_link_timer(io, t);
  if (rc < 0) {
    taxi__mutex_destroy(&t->lock);
    taxi__free(t);
    return rc;
  }
  *out = t;
  return 0;
}

int taxi_io_timer_start(taxi_io_timer_t *t, taxi_time_t delay,
                        taxi_time_t period) {
  if (!t) return taxi__refuse(TAXI_EINVAL, "taxi_io_timer_start: t: NULL");
  bool bad_delay = taxi__io_span_check(delay) < 0;
  if (bad_delay || taxi__io_span_check(period) < 0)
    return taxi__refuse(TAXI_EINVAL,
                        "taxi_io_timer_start: %s: 0 to TAXI_TIME_SPAN_MAX "
                        "ns; got %" PRId64,
                        bad_delay ? "delay" : "period",
                        (int64_t)(bad_delay ? delay : period));
  taxi__mutex_lock(&t->lock);
  bool gone = t->destroying;
  taxi__mutex_unlock(&t->lock);
  if (gone) return TAXI_ESTOPPED;
  return t->io->drv->timer_start(t, delay, period);
}

int taxi_io_timer_stop(taxi_io_timer_t *t) {
  if (!t) return TAXI_EINVAL;
  return t->io->drv->timer_stop(t);
}

int taxi_io_timer_destroy(taxi_io_timer_t *t) {
  if (!t) return TAXI_EINVAL;
  taxi__mutex_lock(&t->lock);
  bool was = t->destroying;
  t->destroying = true;
  taxi__mutex_unlock(&t->lock);
  if (!was) t->io->drv->timer_destroy(t);
  return 0;
}

void taxi__timer_fire(taxi_io_timer_t *t) {
  if (!t->internal) TAXI__IO_COUNT(t->io, timers, 1);
  t->fn(t, t->arg);
}

void taxi__timer_free(taxi_io_timer_t *t) {
  taxi__io_unlink_timer(t->io, t);
  taxi__mutex_destroy(&t->lock);
  taxi__free(t);
}
