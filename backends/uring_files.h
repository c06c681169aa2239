/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_files.h - the io_uring backend's table of registered
 * files (private to backends/uring*.c; see "Registered files" in
 * docs/backends/uring.md for why and when a handle gets a slot).
 *
 * The table is registered once, sparse, when the ring is made.  Every
 * attached handle has an entry here, keyed by its descriptor number; for
 * one the proactor made (adopted: accepted, connected through it), the
 * first request prepared for it installs it into a free slot with an
 * IORING_OP_FILES_UPDATE SQE placed just before that request, and its
 * requests name the slot (IOSQE_FIXED_FILE) from then on.  When the
 * handle's last attachment is released (the core's row is gone: nothing
 * in flight names it), an IORING_OP_FILES_UPDATE of -1 empties the slot,
 * and the slot is free again: any later install of it is queued after
 * that removal, and the kernel runs both in SQ order.
 *
 * Every function is called with the backend's mutex held.  The SQEs come
 * from the backend's own source (sqe_fn), which may submit what is
 * prepared to make room.
 */
#ifndef TAXI_BACKENDS_URING_FILES_H
#define TAXI_BACKENDS_URING_FILES_H

#include "completion.h"

#include <liburing.h>

#include <stdbool.h>
#include <stdint.h>

/* A completion of this file's requests: bit 63 of user_data, never set in
 * the address of an operation record (user space is below 2^57). */
#define URING_FILES_UD ((uint64_t)1 << 63)

typedef struct io_uring_sqe *(*uring_files_sqe_fn)(void *ctx);

typedef struct uring_file_ent uring_file_ent_t;

typedef struct uring_files {
  unsigned size;      /* slots registered; 0: no table, plain fds only */
  int *slot_fd;       /* [size]: the fd an install SQE reads */
  uint32_t *slot_gen; /* [size]: bumped at each install (user_data) */
  uint32_t *free;     /* [size]: free slots, a stack */
  unsigned nfree;
  uint32_t *pending; /* [size]: slots whose removal still needs an SQE */
  unsigned npending;
  uring_file_ent_t *ent; /* [nent], indexed by descriptor */
  size_t nent;
  unsigned sqe_flags; /* IOSQE_CQE_SKIP_SUCCESS where the kernel has it */
  taxi__completion_counters_t *counters;
} uring_files_t;

/* Register a sparse table of `size` slots on the ring (size 0: none).
 * 0, or the errno the kernel refused with (then f->size is 0 and every
 * handle stays on plain fds).  `skip_success`: the kernel honours
 * IOSQE_CQE_SKIP_SUCCESS (IORING_FEAT_CQE_SKIP, 5.17). */
int uring_files_open(uring_files_t *f, int ring_fd, unsigned size,
                     bool skip_success, taxi__completion_counters_t *counters);
/* Free what open made (the ring's exit drops the kernel's table). */
void uring_files_close(uring_files_t *f);

/* A handle was attached: 0, or TAXI_ENOMEM.  It stays on its fd unless
 * adopted. */
int uring_files_attach(uring_files_t *f, int fd);
/* The attached fd is the proactor's own (accepted, connected through it):
 * its first request will install it. */
void uring_files_adopt(uring_files_t *f, int fd);
/* The slot a request on `fd` should name, installing fd first if it has
 * none yet (one SQE from sqe_fn, placed before the request's); -1: name
 * the descriptor itself (no table, the table full, no SQE to install it
 * with now, or its install failed). */
int uring_files_use(uring_files_t *f, int fd, uring_files_sqe_fn sqe_fn,
                    void *ctx);
/* The core released an attachment of fd: nothing in flight names it.  The
 * last one empties its slot; true when that queued an SQE. */
bool uring_files_release(uring_files_t *f, int fd, uring_files_sqe_fn sqe_fn,
                         void *ctx);
/* Queue the removals that found no SQE before; true if any was queued. */
bool uring_files_flush(uring_files_t *f, uring_files_sqe_fn sqe_fn, void *ctx);
/* The CQE of one of this file's requests (user_data has URING_FILES_UD). */
void uring_files_cqe(uring_files_t *f, uint64_t user_data, int res);
/* Whether a request that named `slot` for `fd` failed because the install
 * before it did (then it may go again on the plain fd). */
bool uring_files_install_failed(const uring_files_t *f, int fd, int slot);

#endif /* TAXI_BACKENDS_URING_FILES_H */
