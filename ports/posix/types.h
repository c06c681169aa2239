/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/types.h - the POSIX representations of the port types.
 * Included through ports/port.h only.
 *
 * This header is seen by every translation unit of the library, most of
 * which are compiled as strict C11 without POSIX feature-test macros.  Under
 * -std=c11 glibc and musl declare neither sigset_t nor struct sigaction nor
 * NSIG, so nothing here may depend on <signal.h>: the signal source keeps
 * its signal sets as plain bitmaps, and the dispositions it replaces live in
 * a process-wide table inside ports/posix/signal_pipe.c (one source per
 * process owns a given signal, so a per-signal table is enough).  The
 * pthread types are declared by <pthread.h> in every compilation mode.
 */
#ifndef TAXI_PORTS_POSIX_TYPES_H
#define TAXI_PORTS_POSIX_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef pthread_t taxi__thread_t;
typedef pthread_t taxi__thread_id_t;
typedef pthread_mutex_t taxi__mutex_t;
/* For a process-wide mutex that needs no initialisation call. */
#define TAXI__MUTEX_INITIALIZER PTHREAD_MUTEX_INITIALIZER
typedef pthread_cond_t taxi__cond_t;

typedef struct taxi__wakeup {
  int read_fd;        /* the eventfd, or the pipe's read end */
  int write_fd;       /* the same eventfd, or the pipe's write end */
  atomic_int pending; /* 1 between a write and the next drain */
} taxi__wakeup_t;

/*
 * Signal numbers the bitmaps below can hold.  Every POSIX system taxi knows
 * stays far below it (Linux 64, FreeBSD 128, macOS 31); the self-pipe also
 * sends a signal number as one byte.  ports/posix/signal.c checks the real
 * limit against this at compile time.
 */
#define TAXI__SIGNAL_BITS 256
#define TAXI__SIGNAL_WORDS (TAXI__SIGNAL_BITS / 64)

/* Which mechanism a signal source uses; chosen by taxi__sigsrc_open(). */
enum {
  TAXI__SIGSRC_SIGNALFD = 1, /* Linux signalfd; the signals are blocked */
  TAXI__SIGSRC_PIPE = 2      /* sigaction handler writing to a self-pipe */
};

typedef struct taxi__sigsrc {
  int kind; /* TAXI__SIGSRC_SIGNALFD or TAXI__SIGSRC_PIPE */
  /* The handle watched: with signalfd an epoll set holding signal_fd and
   * pipe_fd (ports/posix/signal_fd.c says why both), else pipe_fd. */
  int fd;
  int signal_fd;                      /* the signalfd, -1 without */
  int pipe_fd;                        /* the self-pipe's read end */
  int write_fd;                       /* the self-pipe's write end */
  uint64_t added[TAXI__SIGNAL_WORDS]; /* the signals this source delivers */
  /* signalfd: of those, the ones the thread had blocked before add */
  uint64_t was_blocked[TAXI__SIGNAL_WORDS];
  /* signalfd: of those, the ones whose default action a handler of the
   * self-pipe's replaced while they are added */
  uint64_t forwarded[TAXI__SIGNAL_WORDS];
} taxi__sigsrc_t;

#endif /* TAXI_PORTS_POSIX_TYPES_H */
