/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/uring_pipe.c - the pipes of the io_uring backend's
 * transmit-file (docs/backends/uring.md, "Transmit-file"): a free list of
 * clean pipes, each grown only as far as the range it carries needs, and
 * a pipe still holding bytes closed rather than reused.  Lock held, or
 * the state not shared (close).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2(2), F_SETPIPE_SZ */
#endif
#include "config.h"

#ifdef TAXI_HAVE_URING

#include "uring_impl.h"

#include "core/common/alloc.h"

#include <fcntl.h>
#include <unistd.h>

void uring_pipe_destroy(uring_state_t *s, uring_pipe_t *p) {
  close(p->fd[0]);
  close(p->fd[1]);
  count_syscall(s);
  count_syscall(s);
  taxi__free(p);
}

/* Grow p towards `want` bytes (at most URING_PIPE_SIZE) where it holds
 * less.  Refused (the user's pipe quota, fs.pipe-max-size), it keeps the
 * size it has: smaller steps, nothing else. */
static void pipe_grow(uring_state_t *s, uring_pipe_t *p, size_t want) {
  int cap;
  if (want > URING_PIPE_SIZE) want = URING_PIPE_SIZE;
  if (want <= p->cap) return;
  count_syscall(s);
  cap = fcntl(p->fd[1], F_SETPIPE_SZ, (int)want);
  if (cap > 0) p->cap = (unsigned)cap;
}

/* A clean pipe for a transmit-file of `len` file bytes, as big as the
 * range needs up to URING_PIPE_SIZE: a small file takes the default size
 * and no fcntl, and only pipes that carry large files count a large size
 * against the user's quota (the kernel counts a pipe's capacity, used or
 * not). */
int uring_pipe_get(uring_state_t *s, uint64_t len, uring_pipe_t **out) {
  uring_pipe_t *p = s->free_pipes;
  /* A range starting inside a page takes one page more. */
  size_t want =
      len < URING_PIPE_SIZE ? (size_t)len + s->page_size : URING_PIPE_SIZE;
  int cap;
  if (p) {
    s->free_pipes = p->next;
    s->nfree_pipes--;
  } else {
    p = taxi__malloc(sizeof *p);
    if (!p) return TAXI_ENOMEM;
    count_syscall(s);
    if (pipe2(p->fd, O_CLOEXEC) < 0) {
      int err = errno;
      taxi__free(p);
      return taxi__error_from_os(err);
    }
    count_syscall(s);
    cap = fcntl(p->fd[1], F_GETPIPE_SZ);
    p->cap = cap > 0 ? (unsigned)cap : 65536u;
  }
  pipe_grow(s, p, want);
  *out = p;
  return 0;
}

/* Give a pipe back; one that still holds data is closed, not reused. */
void uring_pipe_put(uring_state_t *s, uring_pipe_t *p, bool clean) {
  if (!clean || s->nfree_pipes >= URING_PIPES_KEPT) {
    uring_pipe_destroy(s, p);
    return;
  }
  p->next = s->free_pipes;
  s->free_pipes = p;
  s->nfree_pipes++;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int uring_pipe_absent;
#endif /* TAXI_HAVE_URING */
