/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_more.h - the datagrams a multishot pooled receive
 * has brought in already, taken inside the handler of one of them.
 *
 * The proactor delivers a multishot receive one datagram per handler call
 * (taxi_proactor_recvfrom_pooled), and what the backend reported meanwhile
 * waits in its backlog.  A datagram endpoint (core/stream/dgram_proactive.c)
 * takes those with the one being delivered, so that the callbacks of all
 * of them run as one batch, whose replies leave in one sendmmsg, and the
 * dispatching thread goes back to the backend once for them all instead
 * of once a datagram.
 */
#ifndef TAXI_CORE_PROACTOR_PROACTOR_MORE_H
#define TAXI_CORE_PROACTOR_PROACTOR_MORE_H

#include "taxi/proactor.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * While the completion handler of op runs, op a multishot pooled receive
 * (taxi_proactor_recvfrom_pooled with TAXI_READ_MULTISHOT) delivering a
 * datagram (op->more set), from that handler or from a thread that keeps
 * it from returning meanwhile: take op's next datagram if the backend has
 * reported it already.  True: op->data,
 * op->peer, op->peer_len and op->msg_flags now describe it and *bytes is
 * its length, exactly as a handler call would have had them, and its
 * buffer is the caller's to give back (taxi_proactor_buffer_release) like
 * the one of the delivery.  The previous datagram's fields are
 * overwritten: copy what is needed first.  False: nothing was taken (none
 * is waiting, the next is an end or a failure, which the handler gets as
 * usual once it returns, or op is not such a receive), and op is as it was.
 * The datagrams keep their order, and the next handler call delivers the
 * one after the last taken.  Takes p's lock: call it with no lock held
 * that p's handlers or starts take after it (the endpoint's own lock is
 * taken before p's, as for every start).
 */
bool taxi__proactor_next_dgram(taxi_proactor_t *p, taxi_op_t *op,
                               size_t *bytes);

/*
 * Give back n buffers of p's pool (each as taxi_proactor_buffer_release
 * would, its errors ignored: a pointer the pool did not lend is left
 * alone) under one taking of p's lock rather than one each: the datagrams
 * of a batch taken above go back together.  Any thread; the same lock
 * order as taxi__proactor_next_dgram.
 */
void taxi__proactor_buffers_release(taxi_proactor_t *p, void *const *bufs,
                                    unsigned n);

#endif /* TAXI_CORE_PROACTOR_PROACTOR_MORE_H */
