/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/proactor/proactor_op.c - the remainder of an operation, computed from
 * its record's progress (see core/proactor/proactor_op.h).
 *
 * Layer 1 (see core/proactor/proactor_impl.h): it reads a record and calls
 * nothing; the completion layer and the backends call it.
 */
#include "config.h"

#include "core/proactor/proactor_op.h"

static size_t header_len(const taxi_op_t *op) {
  return op->internal_.bufs[TAXI__OP_HEADER].len;
}

/* Store what is left of bufs[first..first+n) after skipping `skip` bytes. */
static size_t tail_of(const taxi_buf_t *bufs, size_t n, size_t skip,
                      taxi_buf_t *out, size_t max) {
  size_t k = 0;
  for (size_t i = 0; i < n && k < max; i++) {
    if (skip >= bufs[i].len) {
      skip -= bufs[i].len;
      continue;
    }
    out[k].base = (char *)bufs[i].base + skip;
    out[k].len = bufs[i].len - skip;
    skip = 0;
    k++;
  }
  return k;
}

size_t taxi__op_remaining(const taxi_op_t *op) {
  return op->internal_.total > op->internal_.done
             ? op->internal_.total - op->internal_.done
             : 0;
}

taxi__tx_part_t taxi__op_tx_part(const taxi_op_t *op) {
  size_t done = op->internal_.done, h = header_len(op);
  if (done < h) return TAXI__TX_HEADER;
  if (done < h + op->internal_.file_len) return TAXI__TX_FILE;
  if (done < op->internal_.total) return TAXI__TX_TRAILER;
  return TAXI__TX_DONE;
}

size_t taxi__op_tx_file_remaining(const taxi_op_t *op) {
  if (taxi__op_tx_part(op) != TAXI__TX_FILE) return 0;
  return header_len(op) + op->internal_.file_len - op->internal_.done;
}

int64_t taxi__op_file_offset(const taxi_op_t *op) {
  if (op->kind == TAXI_OP_TRANSMIT_FILE) {
    size_t into = op->internal_.done - header_len(op);
    return op->internal_.offset + (int64_t)into;
  }
  return op->internal_.offset + (int64_t)op->internal_.done;
}

size_t taxi__op_remaining_bufs(const taxi_op_t *op, taxi_buf_t *out,
                               size_t max) {
  const taxi_buf_t *b = op->internal_.bufs;
  size_t done = op->internal_.done;
  if (max == 0) return 0;
  switch (op->kind) {
    case TAXI_OP_READ:
    case TAXI_OP_READ_FILE:
    case TAXI_OP_WRITE_FILE:
      return tail_of(b, 1, done, out, max);
    case TAXI_OP_WRITE:
      return tail_of(b, op->internal_.nbufs, done, out, max);
    case TAXI_OP_TRANSMIT_FILE:
      switch (taxi__op_tx_part(op)) {
        case TAXI__TX_HEADER:
          return tail_of(&b[TAXI__OP_HEADER], 1, done, out, max);
        case TAXI__TX_TRAILER:
          return tail_of(&b[TAXI__OP_TRAILER], 1,
                         done - header_len(op) - op->internal_.file_len, out,
                         max);
        default:
          return 0;
      }
    default:
      return 0;
  }
}
