/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault_module.h - what the parts of the fault-injection module
 * (libtaxifault.so, see fault.c) share: the calls it wraps and the
 * decision whether one fails.  Linux/glibc only.
 *
 *   fault.c           the rules, the set-up from the environment, decide
 *   fault_wrappers.c  the wrapped system calls
 *   fault_alloc.c     the wrapped allocator
 *
 * The module is preloaded into programs that have symbols of their own:
 * what the parts share is hidden from them (FAULT_HIDDEN).
 */
#ifndef TAXI_TESTS_FAULT_MODULE_H
#define TAXI_TESTS_FAULT_MODULE_H

#include "fault.h"
#include "rules.h"

#include <aio.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the calls that can be made to fail -------------------------------- */

/* X(id, "name"): one entry per site, in the order of `wrapped`. */
#define FAULT_CALLS(X)                      \
  X(epoll_wait, "epoll_wait")               \
  X(epoll_pwait, "epoll_pwait")             \
  X(epoll_ctl, "epoll_ctl")                 \
  X(poll, "poll")                           \
  X(ppoll, "ppoll")                         \
  X(select, "select")                       \
  X(kevent, "kevent")                       \
  X(io_uring_enter, "io_uring_enter")       \
  X(io_uring_setup, "io_uring_setup")       \
  X(io_uring_register, "io_uring_register") \
  X(socket, "socket")                       \
  X(socketpair, "socketpair")               \
  X(accept, "accept")                       \
  X(accept4, "accept4")                     \
  X(connect, "connect")                     \
  X(read, "read")                           \
  X(readv, "readv")                         \
  X(recv, "recv")                           \
  X(recvfrom, "recvfrom")                   \
  X(recvmsg, "recvmsg")                     \
  X(recvmmsg, "recvmmsg")                   \
  X(write, "write")                         \
  X(writev, "writev")                       \
  X(send, "send")                           \
  X(sendto, "sendto")                       \
  X(sendmsg, "sendmsg")                     \
  X(sendmmsg, "sendmmsg")                   \
  X(sendfile, "sendfile")                   \
  X(splice, "splice")                       \
  X(read_eventfd, "read@eventfd")           \
  X(write_eventfd, "write@eventfd")         \
  X(read_pipe, "read@pipe")                 \
  X(write_pipe, "write@pipe")               \
  X(read_signalfd, "read@signalfd")         \
  X(eventfd, "eventfd")                     \
  X(eventfd_write, "eventfd_write")         \
  X(timerfd_create, "timerfd_create")       \
  X(timerfd_settime, "timerfd_settime")     \
  X(signalfd, "signalfd")                   \
  X(pipe, "pipe")                           \
  X(pipe2, "pipe2")                         \
  X(fcntl, "fcntl")                         \
  X(setsockopt, "setsockopt")               \
  X(getsockopt, "getsockopt")               \
  X(aio_read, "aio_read")                   \
  X(aio_write, "aio_write")                 \
  X(aio_suspend, "aio_suspend")             \
  X(aio_error, "aio_error")                 \
  X(aio_return, "aio_return")               \
  X(pthread_create, "pthread_create")       \
  X(malloc, "malloc")                       \
  X(calloc, "calloc")                       \
  X(realloc, "realloc")                     \
  X(clock_gettime, "clock_gettime")

enum {
#define AS_ENUM(id, name) CALL_##id,
  FAULT_CALLS(AS_ENUM)
#undef AS_ENUM
      NCALLS
};

/* The WHAT of a rule that shortens a transfer (rules.h). */
#define WHAT_SHORT FAULT_WHAT_SHORT

#define FAULT_HIDDEN __attribute__((visibility("hidden")))

/* Count a call to `call` made from `caller`; returns the rule's WHAT if
 * this call must fail, else 0. */
FAULT_HIDDEN int fault_decide(int call, const void *caller);
/* Count a call to `call` without deciding anything. */
FAULT_HIDDEN void fault_count(int call);
/* Write msg to stderr and end the process (no allocation). */
FAULT_HIDDEN _Noreturn void fault_die(const char *msg);

#define CALLER __builtin_return_address(0)
#define DECIDE(call) fault_decide(CALL_##call, CALLER)

#endif /* TAXI_TESTS_FAULT_MODULE_H */
