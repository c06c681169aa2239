/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_op.h - what is left of an operation, for the backends.
 *
 * A backend's submit() starts one step of an operation's remainder
 * (backends/completion.h).  These helpers read the record's progress
 * (internal_.done out of internal_.total) so that no backend has to know
 * how the core lays an operation out:
 *   READ, READ_FILE, WRITE_FILE  one buffer, bufs[0], of which `done` bytes
 *                                are transferred;
 *   WRITE                        bufs[0..nbufs), sent in order;
 *   TRANSMIT_FILE                header bufs[TAXI_OP_MAX_BUFS], then
 *                                file_len bytes of `file` from `offset`,
 *                                then trailer bufs[TAXI_OP_MAX_BUFS + 1].
 * Backends may read these fields of op->internal_ directly: file, offset,
 * file_len, addr, addr_len, flags; and they own internal_.backend.
 *
 * Layer 1 of core/proactor/ (see proactor_impl.h): proactor_op.c calls
 * nothing.
 */
#ifndef TAXI_CORE_PROACTOR_OP_H
#define TAXI_CORE_PROACTOR_OP_H

#include "taxi/proactor.h"

#include <stddef.h>
#include <stdint.h>

/* Internal flags of a READ in internal_.flags, above the public ones. */
/* Started by taxi_proactor_read_pooled. */
#define TAXI__READ_POOLED 0x100u
/* ... and the backend chooses the buffer from those given with buf_give
 * (backends/completion.h): no buffer in bufs[], a multishot receive where
 * TAXI_READ_MULTISHOT is set. */
#define TAXI__READ_SELECT 0x200u
/* ... from this group of buffers (backends/completion.h's buf_open): 0
 * the pool, others a size of datagram receives.  In the flags' top bits,
 * above every public and internal flag. */
#define TAXI__READ_GROUP_SHIFT 24

static inline unsigned taxi__op_buf_group(const taxi_op_t *op) {
  return op->internal_.flags >> TAXI__READ_GROUP_SHIFT;
}

/* Index of the transmit-file header and trailer in internal_.bufs. */
#define TAXI__OP_HEADER TAXI_OP_MAX_BUFS
#define TAXI__OP_TRAILER (TAXI_OP_MAX_BUFS + 1)

/* Which part of a transmit-file comes next. */
typedef enum taxi__tx_part {
  TAXI__TX_HEADER,
  TAXI__TX_FILE,
  TAXI__TX_TRAILER,
  TAXI__TX_DONE
} taxi__tx_part_t;

/*
 * The memory still to be read into or sent from, as at most `max` buffers
 * in out (never empty ones).  READ, READ_FILE and WRITE_FILE: one; WRITE:
 * what is left of the gather list; TRANSMIT_FILE: what is left of the
 * header or the trailer when that part is next (0 in the file part).
 * Returns how many buffers were stored.
 */
size_t taxi__op_remaining_bufs(const taxi_op_t *op, taxi_buf_t *out,
                               size_t max);

/* Bytes still to transfer in the whole operation. */
size_t taxi__op_remaining(const taxi_op_t *op);

/* READ_FILE, WRITE_FILE: the file offset of the next byte.  TRANSMIT_FILE
 * in its file part: the offset of the next file byte to send. */
int64_t taxi__op_file_offset(const taxi_op_t *op);

/* TRANSMIT_FILE: the part that comes next, and the file bytes left. */
taxi__tx_part_t taxi__op_tx_part(const taxi_op_t *op);
size_t taxi__op_tx_file_remaining(const taxi_op_t *op);

/* The backend's own room in the record (TAXI_OP_BACKEND_SIZE bytes,
 * aligned for any object type). */
static inline void *taxi__op_backend(taxi_op_t *op) {
  return &op->internal_.backend;
}

#endif /* TAXI_CORE_PROACTOR_OP_H */
