/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/reactor/reactor_backends.h - the ordered table of compiled-in readiness
 * backends and the choice among them.
 */
#ifndef TAXI_CORE_BACKENDS_H
#define TAXI_CORE_BACKENDS_H

#include "backends/readiness.h"

/*
 * Open an instance of the backend called `name`, or of the best one that
 * works when name is NULL (TAXI_BACKEND in the environment, unless the
 * program is set-user-ID, names the one to use then).  On success *ops and
 * *state describe the instance.  TAXI_ENOBACKEND when the name is unknown or
 * nothing works.
 */
int taxi__backend_open(const char *name, const taxi__readiness_ops_t **ops,
                       void **state);

#endif /* TAXI_CORE_BACKENDS_H */
