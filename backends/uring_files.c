/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_files.c - the io_uring backend's table of registered
 * files: the slots, which handle holds which, and the FILES_UPDATE
 * requests that install and empty them (see backends/uring_files.h, and
 * "Registered files" in docs/backends/uring.md).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* syscall(2) */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_files.h"

#include "core/common/alloc.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef IOSQE_CQE_SKIP_SUCCESS
#define IOSQE_CQE_SKIP_SUCCESS (1U << 6)
#endif

/* uring_file_ent_t.state */
enum {
  ENT_USER,      /* the application's: stays on its fd (no adopt) */
  ENT_NEW,       /* adopted, no slot yet: the first request installs it */
  ENT_FIXED,     /* in `slot`, its install queued before any request */
  ENT_REINSTALL, /* in `slot`, attached again meanwhile: install it anew */
  ENT_PLAIN,     /* stays on its fd (the table was full) */
  ENT_FAILED     /* its install failed: plain fd, `slot` kept until the
                    release, since requests queued after it name it */
};

struct uring_file_ent {
  uint32_t refs; /* attachments not yet released (0: no entry) */
  int32_t slot;  /* -1: none */
  unsigned state;
};

/* user_data of an install (removal 0) of slot at generation gen. */
static uint64_t files_ud(uint32_t slot, uint32_t gen, bool install) {
  return URING_FILES_UD | ((uint64_t)(gen & 0x7fffffffu) << 32) |
         ((uint64_t)slot << 1) | (install ? 1u : 0u);
}

static void count(atomic_uint_fast64_t *c, int delta) {
  if (delta > 0)
    atomic_fetch_add_explicit(c, (uint64_t)delta, memory_order_relaxed);
  else
    atomic_fetch_sub_explicit(c, (uint64_t)-delta, memory_order_relaxed);
}

int uring_files_open(uring_files_t *f, int ring_fd, unsigned size,
                     bool skip_success, taxi__completion_counters_t *counters) {
  int *empty;
  long r;
  memset(f, 0, sizeof *f);
  f->counters = counters;
  if (size == 0) return 0;
  f->slot_fd = taxi__calloc(size, sizeof *f->slot_fd);
  f->slot_gen = taxi__calloc(size, sizeof *f->slot_gen);
  f->free = taxi__calloc(size, sizeof *f->free);
  f->pending = taxi__calloc(size, sizeof *f->pending);
  if (!f->slot_fd || !f->slot_gen || !f->free || !f->pending) {
    uring_files_close(f);
    return ENOMEM;
  }
  /* A table of -1 entries is sparse on every kernel this backend runs on
   * (5.11); IORING_RSRC_REGISTER_SPARSE (5.19) would only spare copying
   * the array.  The system call itself, not liburing's wrapper, which
   * raises RLIMIT_NOFILE on EMFILE: a library does not change its
   * process's limits (the caller bounds `size` by it instead). */
  empty = f->slot_fd;
  for (unsigned i = 0; i < size; i++) empty[i] = -1;
  atomic_fetch_add_explicit(&counters->syscalls, 1, memory_order_relaxed);
  r = syscall(__NR_io_uring_register, ring_fd, IORING_REGISTER_FILES, empty,
              size);
  if (r < 0) {
    int err = errno;
    uring_files_close(f);
    return err;
  }
  /* Slot 0 on top: low slots first, for no reason but tidiness. */
  for (unsigned i = 0; i < size; i++) f->free[i] = size - 1 - i;
  f->nfree = size;
  f->size = size;
  f->sqe_flags = skip_success ? IOSQE_CQE_SKIP_SUCCESS : 0;
  return 0;
}

void uring_files_close(uring_files_t *f) {
  /* The gauge counts this ring's slots in use; they go with it. */
  for (size_t i = 0; i < f->nent; i++)
    if (f->ent[i].refs &&
        (f->ent[i].state == ENT_FIXED || f->ent[i].state == ENT_REINSTALL))
      count(&f->counters->files_registered, -1);
  taxi__free(f->slot_fd);
  taxi__free(f->slot_gen);
  taxi__free(f->free);
  taxi__free(f->pending);
  taxi__free(f->ent);
  memset(f, 0, sizeof *f);
}

static uring_file_ent_t *ent_of(const uring_files_t *f, int fd) {
  if (fd < 0 || (size_t)fd >= f->nent || f->ent[fd].refs == 0) return NULL;
  return &f->ent[fd];
}

int uring_files_attach(uring_files_t *f, int fd) {
  uring_file_ent_t *e;
  if (f->size == 0 || fd < 0) return 0;
  if ((size_t)fd >= f->nent) {
    size_t n = f->nent ? f->nent : 64;
    while (n <= (size_t)fd) n *= 2;
    e = taxi__reallocarray(f->ent, n, sizeof *e);
    if (!e) return TAXI_ENOMEM;
    memset(e + f->nent, 0, (n - f->nent) * sizeof *e);
    f->ent = e;
    f->nent = n;
  }
  e = &f->ent[fd];
  if (e->refs++ == 0) {
    e->slot = -1;
    e->state = ENT_USER;
  } else if (e->state == ENT_FIXED) {
    /* Attached again while a released attachment's requests still run
     * (detached, then attached at once).  The number may meanwhile name
     * another file (closed and reused against taxi/proactor.h's advice);
     * installing it again makes the slot name what the fd names, as a
     * plain request would. */
    e->state = ENT_REINSTALL;
  }
  return 0;
}

void uring_files_adopt(uring_files_t *f, int fd) {
  uring_file_ent_t *e = ent_of(f, fd);
  if (e && e->state == ENT_USER) e->state = ENT_NEW;
}

static void prep_update(uring_files_t *f, struct io_uring_sqe *sqe,
                        uint32_t slot, const int *fds, bool install) {
  /* The kernel reads *fds when it issues the request, which is inline at
   * submission: the array must last until then (a slot's own entry of
   * slot_fd, or a constant). */
  io_uring_prep_rw(IORING_OP_FILES_UPDATE, sqe, -1, fds, 1, slot);
  sqe->flags |= f->sqe_flags;
  sqe->user_data = files_ud(slot, f->slot_gen[slot], install);
}

static bool queue_install(uring_files_t *f, uring_file_ent_t *e, int fd,
                          uring_files_sqe_fn sqe_fn, void *ctx) {
  struct io_uring_sqe *sqe = sqe_fn(ctx);
  uint32_t slot = (uint32_t)e->slot;
  if (!sqe) return false;
  f->slot_fd[slot] = fd;
  f->slot_gen[slot]++;
  prep_update(f, sqe, slot, &f->slot_fd[slot], true);
  return true;
}

int uring_files_use(uring_files_t *f, int fd, uring_files_sqe_fn sqe_fn,
                    void *ctx) {
  uring_file_ent_t *e = ent_of(f, fd);
  if (!e) return -1;
  switch (e->state) {
    case ENT_FIXED:
      return e->slot;
    case ENT_NEW:
      if (f->nfree == 0) {
        /* Full: this handle stays plain for its life (counted once). */
        e->state = ENT_PLAIN;
        count(&f->counters->files_failed, 1);
        return -1;
      }
      e->slot = (int32_t)f->free[f->nfree - 1];
      if (!queue_install(f, e, fd, sqe_fn, ctx)) {
        e->slot = -1; /* no SQE now: plain this time, tried again later */
        return -1;
      }
      f->nfree--;
      e->state = ENT_FIXED;
      count(&f->counters->files_registered, 1);
      return e->slot;
    case ENT_REINSTALL:
      if (!queue_install(f, e, fd, sqe_fn, ctx)) return -1;
      e->state = ENT_FIXED;
      return e->slot;
    default:
      return -1;
  }
}

static const int no_file = -1;

/* Empty `slot` (an SQE now, or on the pending list); a slot is free only
 * once its removal is queued, so that a later install comes after it. */
static bool queue_removal(uring_files_t *f, uint32_t slot,
                          uring_files_sqe_fn sqe_fn, void *ctx) {
  struct io_uring_sqe *sqe = sqe_fn(ctx);
  if (!sqe) {
    f->pending[f->npending++] = slot;
    return false;
  }
  prep_update(f, sqe, slot, &no_file, false);
  f->free[f->nfree++] = slot;
  return true;
}

bool uring_files_release(uring_files_t *f, int fd, uring_files_sqe_fn sqe_fn,
                         void *ctx) {
  uring_file_ent_t *e = ent_of(f, fd);
  int32_t slot;
  if (!e || --e->refs > 0) return false;
  slot = e->slot;
  if (e->state == ENT_FIXED || e->state == ENT_REINSTALL)
    count(&f->counters->files_registered, -1);
  e->slot = -1;
  e->state = ENT_USER;
  if (slot < 0) return false;
  return queue_removal(f, (uint32_t)slot, sqe_fn, ctx);
}

bool uring_files_flush(uring_files_t *f, uring_files_sqe_fn sqe_fn, void *ctx) {
  bool queued = false;
  while (f->npending > 0) {
    uint32_t slot = f->pending[f->npending - 1];
    struct io_uring_sqe *sqe = sqe_fn(ctx);
    if (!sqe) break;
    f->npending--;
    prep_update(f, sqe, slot, &no_file, false);
    f->free[f->nfree++] = slot;
    queued = true;
  }
  return queued;
}

void uring_files_cqe(uring_files_t *f, uint64_t user_data, int res) {
  uint32_t slot = (uint32_t)(user_data >> 1) & 0x7fffffffu;
  uint32_t gen = (uint32_t)(user_data >> 32) & 0x7fffffffu;
  uring_file_ent_t *e;
  /* A removal: nothing to do either way (its failure, -ENXIO without a
   * table, cannot happen to a table registered for the ring's life). */
  if (!(user_data & 1u) || res >= 0 || slot >= f->size) return;
  /* An install failed (its fd closed before the kernel ran it, say): the
   * handle goes back to its fd, and the requests queued after the
   * install, which fail with EBADF, are prepared again on the fd (see
   * uring_files_install_failed).  A stale CQE (the slot reinstalled
   * since) is ignored. */
  if ((f->slot_gen[slot] & 0x7fffffffu) != gen) return;
  e = ent_of(f, f->slot_fd[slot]);
  if (!e || e->slot != (int32_t)slot || e->state != ENT_FIXED) return;
  e->state = ENT_FAILED;
  count(&f->counters->files_registered, -1);
  count(&f->counters->files_failed, 1);
}

bool uring_files_install_failed(const uring_files_t *f, int fd, int slot) {
  const uring_file_ent_t *e = ent_of(f, fd);
  return e && e->state == ENT_FAILED && e->slot == slot;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_files_absent;
#endif /* TAXI_HAVE_URING */
