/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/pools/lf_options.c - the options of a Leader/Followers pool: the
 * defaults, and the checks taxi_lf_create and taxi_lf_create_proactor
 * make, each refusal with its detail (core/common/detail.h).
 */
#include "config.h"

#include "core/pools/dispatch_source.h"
#include "core/common/detail.h"
#include "core/common/options.h"

#include <stdio.h>
#include <string.h>

void taxi_lf_options_init(taxi_lf_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o; /* TAXI_PROMOTE_LIFO, TAXI_LEADERS_ONE */
}

int taxi__lf_options_read(taxi_lf_options_t *o, const taxi_lf_options_t *in,
                          bool multi_wait, const char *fn) {
  char where[64];
  snprintf(where, sizeof where, "%s: options", fn);
  taxi_lf_options_init(o);
  if (taxi__options_copy(o, sizeof *o, in, sizeof *o, where,
                         "taxi_lf_options_init") < 0)
    return TAXI_EINVAL;
  if ((unsigned)o->promotion > TAXI_PROMOTE_SHARED)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.promotion: not a taxi_promotion_t; got %d", where,
                        (int)o->promotion);
  if ((unsigned)o->leaders > TAXI_LEADERS_MANY)
    return taxi__refuse(TAXI_EINVAL, "%s.leaders: not a taxi_leaders_t; got %d",
                        where, (int)o->leaders);
  if (o->handoff_ns > TAXI_LF_HANDOFF_MAX_NS)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.handoff_ns: at most TAXI_LF_HANDOFF_MAX_NS "
                        "(%u); got %llu",
                        where, TAXI_LF_HANDOFF_MAX_NS,
                        (unsigned long long)o->handoff_ns);
  if (o->handoff_ns == 0) o->handoff_ns = TAXI_LF_HANDOFF_DEFAULT_NS;
  if (o->leaders == TAXI_LEADERS_MANY && !multi_wait)
    return taxi__refuse(TAXI_ENOTSUP,
                        "%s.leaders: TAXI_LEADERS_MANY needs a backend on "
                        "which several threads may wait at once (epoll, "
                        "kqueue, iocp); this one lets one wait at a time",
                        where);
  return 0;
}
