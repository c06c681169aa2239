/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/ring_index.h - moving an index round a ring without a
 * division.
 *
 * The rings of the message path (a stream's write records and output
 * ring, a reactor's ready list) advance an index by at most one lap at a
 * time, so `i % cap` is a compare and a subtraction; `%` would be a
 * division, several times a message.
 */
#ifndef TAXI_CORE_RING_INDEX_H
#define TAXI_CORE_RING_INDEX_H

#include <stddef.h>

/* i mod cap, for an i below 2 * cap. */
static inline size_t taxi__wrap(size_t i, size_t cap) {
  return i >= cap ? i - cap : i;
}

#endif /* TAXI_CORE_RING_INDEX_H */
