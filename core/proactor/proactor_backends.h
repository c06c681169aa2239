/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_backends.h - the ordered table of compiled-in
 * completion backends and the choice among them.  Layer 1 of
 * core/proactor/ (see proactor_impl.h): the life cycle calls it.
 */
#ifndef TAXI_CORE_PROACTOR_BACKENDS_H
#define TAXI_CORE_PROACTOR_BACKENDS_H

#include "backends/completion.h"

/*
 * Open an instance of the backend named `name` ("emulated", or with a
 * variant: "emulated:poll"), or, for NULL, of the one TAXI_PROACTOR names
 * in the environment (ignored in set-user-ID programs), or else of the
 * first in order of preference that opens.  On success *ops and *state
 * describe the instance.  Errors: TAXI_ENOBACKEND (unknown name, or
 * nothing opens), TAXI_ENOTSUP / TAXI_EPERM (the named backend exists but
 * is refused here), TAXI_ENOMEM.
 */
int taxi__proactor_backend_open(const char *name,
                                const taxi_proactor_options_t *opts,
                                taxi__completion_counters_t *counters,
                                const taxi__completion_ops_t **ops,
                                void **state);

#endif /* TAXI_CORE_PROACTOR_BACKENDS_H */
