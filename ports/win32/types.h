/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/types.h - the Windows representations of the port types.
 * Included through ports/port.h only.
 *
 * Every translation unit of the library sees this header, so it does not
 * include <windows.h>: that header defines macros (near, far, interface,
 * small, ERROR, ...) that core code has no reason to know about.  The
 * types below are layout-compatible stand-ins; ports/win32/thread.c
 * checks at compile time that each one is as large and as aligned as the
 * Windows type it holds (SRWLOCK, CONDITION_VARIABLE, HANDLE, DWORD).
 */
#ifndef TAXI_PORTS_WIN32_TYPES_H
#define TAXI_PORTS_WIN32_TYPES_H

#include <stdatomic.h>
#include <stdint.h>

/* A thread: its HANDLE (for join) and its id. */
typedef struct taxi__thread {
  void *handle;
  unsigned long id;
} taxi__thread_t;
typedef unsigned long taxi__thread_id_t; /* a DWORD thread id */

/* An SRWLOCK (one pointer), used in exclusive mode only. */
typedef struct taxi__mutex {
  void *ptr_;
} taxi__mutex_t;
/* SRWLOCK_INIT: all zero. */
#define TAXI__MUTEX_INITIALIZER \
  { 0 }

/* A CONDITION_VARIABLE (one pointer). */
typedef struct taxi__cond {
  void *ptr_;
} taxi__cond_t;

/*
 * The wake-up channel: a connected pair of loopback TCP sockets (Winsock
 * has neither pipes nor eventfd that select or WSAPoll could watch).
 * The reader end is watched; the writer end gets one byte per wake-up.
 */
typedef struct taxi__wakeup {
  uintptr_t read_sock;  /* SOCKET */
  uintptr_t write_sock; /* SOCKET */
  atomic_int pending;   /* 1 between a write and the next drain */
} taxi__wakeup_t;

/* Windows has no POSIX signals: taxi__signal_limit() is 0, so the core
 * never opens a source and taxi_reactor_add_signal() is TAXI_ENOTSUP.
 * The type exists because the reactor embeds one. */
typedef struct taxi__sigsrc {
  int unused;
} taxi__sigsrc_t;

#endif /* TAXI_PORTS_WIN32_TYPES_H */
