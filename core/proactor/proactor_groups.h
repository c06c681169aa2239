/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_groups.h - groups of provided buffers sized for
 * datagram receives larger than a buffer of the proactor's pool.
 *
 * The pool's buffers (4 KiB for a context's proactors) hold a datagram of
 * TAXI_PROACTOR_DGRAM_ROOM bytes less; a datagram endpoint with a larger
 * recv_size (65,536 by default) would otherwise keep single receives
 * into buffers of its own, one completion and one entry into the kernel
 * a datagram.  Where the backend chooses the buffers (io_uring's rings
 * of provided buffers), the proactor keeps, besides its pool, a group of
 * buffers for each of a few sizes of receive, shared by every endpoint
 * on the proactor: made on the first endpoint's asking, a few buffers to
 * start with, doubled while its receives find none free, up to a cap, so
 * that its memory follows the datagrams in flight, not the endpoints.
 * A buffer of a group is lent and given back as the pool's are
 * (taxi_proactor_buffer_release and taxi__proactor_buffers_release find
 * its group from its address).
 *
 * For core/stream/dgram_proactive.c; not part of the API.
 */
#ifndef TAXI_CORE_PROACTOR_PROACTOR_GROUPS_H
#define TAXI_CORE_PROACTOR_PROACTOR_GROUPS_H

#include "taxi/proactor.h"

#include <stddef.h>

/* The largest recv_size a group serves: every IPv4 datagram.  Larger
 * receives keep buffers of their own. */
#define TAXI__DGROUP_MAX_RECV 65536u

/*
 * The group whose buffers hold a datagram of recv_size bytes (and the
 * kernel's header before it), made now if no endpoint asked for it
 * before, in *group.  0; TAXI_ENOTSUP when p has none for that size (a
 * backend that does not choose buffers, p made without a pool,
 * recv_size above TAXI__DGROUP_MAX_RECV): the caller receives into its
 * own buffers then; TAXI_ENOMEM; TAXI_EINVAL (p or group NULL).  The
 * group's buffers may be larger than recv_size: the caller cuts a longer
 * datagram at recv_size itself.  Any thread; takes p's lock.
 */
int taxi__proactor_dgram_group(taxi_proactor_t *p, size_t recv_size,
                               unsigned *group);

/*
 * A multishot taxi_proactor_recvfrom_pooled (TAXI_READ_MULTISHOT) whose
 * datagrams arrive in buffers of `group` (from
 * taxi__proactor_dgram_group) instead of the pool's: the same deliveries,
 * ends, errors and guarantees, op->data inside a buffer of the group,
 * given back as the pool's (taxi_proactor_buffer_release).  0, or the
 * errors of taxi_proactor_recvfrom_pooled (TAXI_EINVAL too for a group
 * not made).  Any thread.
 */
int taxi__proactor_recvfrom_group(taxi_proactor_t *p, taxi_op_t *op,
                                  taxi_handle_t h, unsigned group,
                                  taxi_completion_fn fn, void *act);

#endif /* TAXI_CORE_PROACTOR_PROACTOR_GROUPS_H */
