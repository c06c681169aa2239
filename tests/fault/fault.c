/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault.c - an LD_PRELOAD module that makes chosen system calls
 * fail, for the fault-injection tests.
 *
 *     LD_PRELOAD=.../libtaxifault.so TAXI_FAULT=SPEC program ...
 *
 * SPEC is a comma-separated list of rules NAME:NTH[:WHAT[:COUNT[:SCOPE]]]:
 *   NAME   the call (see FAULT_CALLS below for the whole list), or one of
 *          the sites that only count some of a call's uses:
 *            read@eventfd, write@eventfd  reads and writes on descriptors
 *                       made by eventfd() (the wake-up channel),
 *            read@pipe, write@pipe  the same on pipes (the wake-up and
 *                       signal self-pipes, the splice pipes),
 *            read@signalfd  reads of a signalfd;
 *          the plain read, readv, write and writev count every call but
 *          fail only those on other descriptors (sockets, files), so that
 *          a rule for a connection's transfers never hits the wake-up;
 *          io_uring_enter, io_uring_setup and io_uring_register are the
 *          syscall(2) calls of those numbers;
 *   NTH    the first call to fail, counting from 1 after the rules were
 *          armed (or after the gate opened, see TAXI_FAULT_AFTER);
 *   WHAT   an errno name (ENOMEM, EINTR, EAGAIN, EMFILE, ENFILE, ENOBUFS,
 *          ECONNRESET, EPIPE, EBADF, EINVAL, ...; default EINTR) or
 *          "short", a transfer of half the bytes asked for (at least 1);
 *   COUNT  how many calls in a row fail from NTH on (default 1; 0: every
 *          call from NTH on, a persistent failure);
 *   SCOPE  "any" (default): every thread's calls count; "others": only the
 *          calls of threads other than the one that armed the rules (their
 *          own count), so a test can fail a pool thread's poll() while it
 *          polls itself.
 * Example: TAXI_FAULT=epoll_wait:3:ENOMEM,epoll_ctl:1:ENOMEM:2
 * (The rules are parsed and applied by rules.c, which the Windows layer,
 * iat_win32.c, shares.)
 *
 * How each kind of call fails: calls that return -1 and set errno do so
 * without being made; pthread_create returns the error; malloc, calloc and
 * realloc return NULL with errno ENOMEM (whatever WHAT says); aio_error
 * reports a finished request as failed with WHAT (a request still in
 * progress is reported as such and not counted, so that no test frees a
 * request the C library still owns); aio_return returns -1 with WHAT.
 *
 * Other variables, read when the module loads:
 *   TAXI_FAULT_AFTER=NAME[/NAME...]  the rules count nothing until the
 *          first call of one of these names (say accept/accept4: the first
 *          connection), which counts as a call of its own name; the
 *          counters of taxi_fault_calls() count from the start regardless.
 *          A way to aim at the calls of the steady state rather than those
 *          of start-up, without knowing how many start-up makes.
 *   TAXI_FAULT_CALLER=TEXT[/TEXT...]  the rules count only calls made
 *          directly from code in a loaded object whose path contains one
 *          of the TEXTs (say "libtaxi/echo_server": calls made by the
 *          library or the program, not those the C library makes for its
 *          own ends, such as stdio's writes).  Objects loaded later are
 *          not seen.
 *   TAXI_FAULT_STATS=FILE  at exit, append to FILE one line per call
 *          made: "PROGRAM NAME CALLS INJECTED" (tests/fault/sweep.sh reads
 *          which calls a configuration makes from it).
 *   TAXI_FAULT_ONLY=PROGRAM  all of the above applies only in a process
 *          of that name (an "lt-" prefix ignored); in others the module
 *          only forwards.  So that a shell wrapper (libtool's) run with
 *          the module preloaded fails nothing of its own.
 *
 * A test program that loaded this module can also re-arm it at run time:
 * taxi_fault_arm(SPEC) replaces the rules and zeroes the counters, and
 * taxi_fault_calls(NAME) / taxi_fault_injected(NAME) say how often NAME was
 * called and failed on purpose since then, so a test can check that the
 * fault it meant to inject was injected (tests/fault/fault.h finds these
 * with dlsym, so programs still run without the module).
 *
 * Each wrapper counts the call with a relaxed atomic and forwards it to the
 * next definition (the C library's, or a sanitizer's interceptor), found
 * with dlsym(RTLD_NEXT) on first use.  Calls are counted process-wide,
 * whichever code makes them, so a rule counts the test's own calls to a
 * function too: tests inject into calls only the library makes, use
 * TAXI_FAULT_CALLER, or count with that in mind.
 *
 * What cannot be reached from here: calls the C library makes to itself
 * (glibc's eventfd_write() and its aio helper threads call the system
 * directly), and the system calls of liburing built without the C library
 * (Debian's liburing2 makes io_uring_setup, io_uring_register, mmap and
 * munmap as inline system-call instructions: io_uring_queue_init and the
 * probe cannot be failed; the io_uring_enter calls taxi makes itself, with
 * syscall(2), can).  Operations the kernel carries out for a ring (the
 * reads, writes and accepts of the uring backend) make no call at all.
 *
 * Linux/glibc only; elsewhere this file compiles to nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT, accept4, pipe2, splice, dl_iterate_phdr */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

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
  X(write, "write")                         \
  X(writev, "writev")                       \
  X(send, "send")                           \
  X(sendto, "sendto")                       \
  X(sendmsg, "sendmsg")                     \
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
  X(realloc, "realloc")

enum {
#define AS_ENUM(id, name) CALL_##id,
  FAULT_CALLS(AS_ENUM)
#undef AS_ENUM
      NCALLS
};

static const char *const wrapped[NCALLS] = {
#define AS_NAME(id, name) name,
    FAULT_CALLS(AS_NAME)
#undef AS_NAME
};

/* ---- rules (tests/fault/rules.c) --------------------------------------- */

#define WHAT_SHORT FAULT_WHAT_SHORT

static const fault_errname_t errnos[] = {
    {"EINTR", EINTR},
    {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM},
    {"ENOBUFS", ENOBUFS},
    {"EMFILE", EMFILE},
    {"ENFILE", ENFILE},
    {"ECONNRESET", ECONNRESET},
    {"EPIPE", EPIPE},
    {"EBADF", EBADF},
    {"EINVAL", EINVAL},
    {"EIO", EIO},
    {"ECONNABORTED", ECONNABORTED},
    {"EPROTO", EPROTO},
    {"ETIMEDOUT", ETIMEDOUT},
    {"EPERM", EPERM},
    {"ENOSPC", ENOSPC},
    {"EBUSY", EBUSY},
    {"ENOSYS", ENOSYS},
    {"ECANCELED", ECANCELED},
};

_Static_assert(NCALLS <= FAULT_MAX_SITES, "FAULT_MAX_SITES is too small");

static fault_rules_t set = {
    .sites = wrapped,
    .nsites = NCALLS,
    .errors = errnos,
    .nerrors = sizeof errnos / sizeof errnos[0],
    .default_what = EINTR,
    .arming = ATOMIC_FLAG_INIT,
};

static int call_index(const char *name, size_t len) {
  return fault_rules_site(&set, name, len);
}

/* TAXI_FAULT_AFTER: the gate is open once one of `gate` was called. */
static bool gate[NCALLS];
static atomic_bool gate_open = true;

/* TAXI_FAULT_CALLER: the code ranges whose calls the rules count. */
#define MAX_RANGES 16
static struct { uintptr_t lo, hi; } ranges[MAX_RANGES];
static int nranges = -1; /* -1: every caller */

int taxi_fault_arm(const char *spec) {
  return fault_rules_arm(&set, spec) < 0 ? -EINVAL : 0;
}

unsigned long taxi_fault_calls(const char *name) {
  return fault_rules_calls(&set, name);
}

unsigned long taxi_fault_injected(const char *name) {
  return fault_rules_injected(&set, name);
}

/* ---- set-up from the environment ----------------------------------------
 * No allocation here: malloc is one of the wrapped calls. */

static void die(const char *msg) {
  ssize_t ignored = write(2, msg, strlen(msg));
  (void)ignored;
  _exit(2);
}

static void parse_gate(const char *list) {
  const char *s = list;
  bool any = false;
  while (*s) {
    const char *end = strchr(s, '/');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int i = call_index(s, len);
    if (i < 0) die("libtaxifault: bad TAXI_FAULT_AFTER\n");
    gate[i] = any = true;
    s += len + (end ? 1 : 0);
  }
  if (any) atomic_store(&gate_open, false);
}

static int add_ranges(struct dl_phdr_info *info, size_t size, void *arg) {
  const char *text = arg;
  (void)size;
  const char *name = info->dlpi_name;
  /* The main program has an empty name: match it by its own path. */
  char exe[512];
  if (!name || !*name) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    name = exe;
  }
  bool match = false;
  for (const char *t = text; *t && !match;) {
    const char *end = strchr(t, '/');
    size_t len = end ? (size_t)(end - t) : strlen(t);
    for (const char *p = name; *p && !match; p++)
      match = strncmp(p, t, len) == 0 && len > 0;
    t += len + (end ? 1 : 0);
  }
  if (!match) return 0;
  for (int i = 0; i < info->dlpi_phnum && nranges < MAX_RANGES; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
    ranges[nranges].hi = ranges[nranges].lo + ph->p_memsz;
    nranges++;
  }
  return 0;
}

static const char *stats_file;

static void write_stats(void) {
  int fd = open(stats_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  for (int i = 0; i < NCALLS; i++) {
    unsigned long c = atomic_load(&set.calls[i]);
    if (!c) continue;
    char line[160];
    int n = snprintf(line, sizeof line, "%s %s %lu %lu\n",
                     program_invocation_short_name, wrapped[i], c,
                     atomic_load(&set.injected[i]));
    ssize_t ignored = write(fd, line, (size_t)n);
    (void)ignored;
  }
  close(fd);
}

/* Whether TAXI_FAULT_ONLY leaves this process out. */
static bool left_out(void) {
  const char *only = getenv("TAXI_FAULT_ONLY");
  if (!only || !*only) return false;
  const char *me = program_invocation_short_name;
  if (strncmp(me, "lt-", 3) == 0) me += 3;
  return strcmp(me, only) != 0;
}

__attribute__((constructor)) static void fault_init(void) {
  if (left_out()) return;
  const char *spec = getenv("TAXI_FAULT");
  if (spec && taxi_fault_arm(spec) < 0)
    die("libtaxifault: bad TAXI_FAULT rule list\n");
  const char *after = getenv("TAXI_FAULT_AFTER");
  if (after && *after) parse_gate(after);
  const char *caller = getenv("TAXI_FAULT_CALLER");
  if (caller && *caller) {
    nranges = 0;
    dl_iterate_phdr(add_ranges, (void *)caller);
  }
  stats_file = getenv("TAXI_FAULT_STATS");
  if (stats_file && *stats_file) atexit(write_stats);
}

static bool from_chosen_code(const void *caller) {
  if (nranges < 0) return true;
  uintptr_t a = (uintptr_t)caller;
  for (int i = 0; i < nranges; i++)
    if (a >= ranges[i].lo && a < ranges[i].hi) return true;
  return false;
}

/* Count a call to `call` made from `caller`; returns the rule's WHAT if
 * this call must fail, else 0. */
static int decide(int call, const void *caller) {
  fault_rules_count(&set, call);
  if (!atomic_load_explicit(&gate_open, memory_order_acquire)) {
    if (!gate[call]) return 0;
    atomic_store_explicit(&gate_open, true, memory_order_release);
  }
  if (!from_chosen_code(caller)) return 0;
  return fault_rules_decide(&set, call);
}

#define CALLER __builtin_return_address(0)
#define DECIDE(call) decide(CALL_##call, CALLER)

/* ---- what kind of descriptor a read or write is on ----------------------
 * Recorded when this module sees the descriptor made, forgotten at close. */

enum { FD_OTHER, FD_EVENTFD, FD_PIPE, FD_SIGNALFD };
#define MAX_TRACKED_FD 65536
static _Atomic unsigned char fd_kind[MAX_TRACKED_FD];

static void set_kind(int fd, int kind) {
  if (fd >= 0 && fd < MAX_TRACKED_FD)
    atomic_store_explicit(&fd_kind[fd], (unsigned char)kind,
                          memory_order_relaxed);
}

static int kind_of(int fd) {
  return fd >= 0 && fd < MAX_TRACKED_FD
             ? atomic_load_explicit(&fd_kind[fd], memory_order_relaxed)
             : FD_OTHER;
}

/* The site of a read or write on `fd`, besides the plain call, or -1. */
static int read_site(int fd) {
  switch (kind_of(fd)) {
    case FD_EVENTFD:
      return CALL_read_eventfd;
    case FD_PIPE:
      return CALL_read_pipe;
    case FD_SIGNALFD:
      return CALL_read_signalfd;
    default:
      return -1;
  }
}

static int write_site(int fd) {
  switch (kind_of(fd)) {
    case FD_EVENTFD:
      return CALL_write_eventfd;
    case FD_PIPE:
      return CALL_write_pipe;
    default:
      return -1;
  }
}

/* A read or write: on a wake-up or signal descriptor, the rules of its
 * site decide (the plain call is only counted); on any other, the plain
 * call's.  So "write:1:EPIPE" fails a socket's write, never the wake-up's. */
static int decide_rw(int call, int site, const void *caller) {
  if (site < 0) return decide(call, caller);
  fault_rules_count(&set, call);
  return decide(site, caller);
}

/* Decide for both: the first rule that says fail wins; both are counted. */
static int decide2(int call, int site, const void *caller) {
  int what = decide(site, caller);
  int plain = decide(call, caller);
  return what ? what : plain;
}

/* ---- the wrappers ------------------------------------------------------ */

/* The next definition of `name` (of the type of our own), looked up once. */
#define NEXT_OR(name, fail)                                                   \
  static __typeof__(&name) next_##name;                                       \
  if (!next_##name) next_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name); \
  if (!next_##name) {                                                         \
    errno = ENOSYS;                                                           \
    return fail;                                                              \
  }
#define NEXT(name) NEXT_OR(name, -1)

/* Fail with errno `what` (a plain error) for calls returning -1. */
#define FAIL_ERRNO(what) \
  do {                   \
    errno = (what);      \
    return -1;           \
  } while (0)

#define PLAIN(call)               \
  int what = DECIDE(call);        \
  if (what > 0) FAIL_ERRNO(what); \
  (void)what

static size_t shorter(size_t len) { return len > 1 ? len / 2 : len; }

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout) {
  NEXT(epoll_wait);
  PLAIN(epoll_wait);
  return next_epoll_wait(epfd, ev, max, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
                const sigset_t *mask) {
  NEXT(epoll_pwait);
  PLAIN(epoll_pwait);
  return next_epoll_pwait(epfd, ev, max, timeout, mask);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  NEXT(epoll_ctl);
  PLAIN(epoll_ctl);
  return next_epoll_ctl(epfd, op, fd, ev);
}

int poll(struct pollfd *fds, nfds_t n, int timeout) {
  NEXT(poll);
  PLAIN(poll);
  return next_poll(fds, n, timeout);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
          const sigset_t *mask) {
  NEXT(ppoll);
  PLAIN(ppoll);
  return next_ppoll(fds, n, ts, mask);
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
  NEXT(select);
  PLAIN(select);
  return next_select(n, r, w, e, tv);
}

/* libkqueue's kevent, where a program uses it; without libkqueue no one
 * calls this (and dlsym finds nothing to forward to: ENOSYS). */
struct kevent;
int kevent(int kq, const struct kevent *changes, int nchanges,
           struct kevent *events, int nevents, const struct timespec *ts);
int kevent(int kq, const struct kevent *changes, int nchanges,
           struct kevent *events, int nevents, const struct timespec *ts) {
  NEXT(kevent);
  PLAIN(kevent);
  return next_kevent(kq, changes, nchanges, events, nevents, ts);
}

/* syscall(2): taxi's uring backend makes io_uring_enter with it.  The six
 * argument words are forwarded whatever the number takes (the x86-64 and
 * aarch64 conventions pass them in registers, so reading unused ones is
 * harmless there). */
long syscall(long number, ...) {
  NEXT(syscall);
  va_list ap;
  long a[6];
  va_start(ap, number);
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  int call = -1;
#ifdef __NR_io_uring_enter
  if (number == __NR_io_uring_enter) call = CALL_io_uring_enter;
  if (number == __NR_io_uring_setup) call = CALL_io_uring_setup;
  if (number == __NR_io_uring_register) call = CALL_io_uring_register;
#endif
  if (call >= 0) {
    int what = decide(call, CALLER);
    if (what > 0) FAIL_ERRNO(what);
  }
  return next_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int socket(int domain, int type, int protocol) {
  NEXT(socket);
  PLAIN(socket);
  return next_socket(domain, type, protocol);
}

int socketpair(int domain, int type, int protocol, int sv[2]) {
  NEXT(socketpair);
  PLAIN(socketpair);
  int rc = next_socketpair(domain, type, protocol, sv);
  if (rc == 0) {
    set_kind(sv[0], FD_OTHER);
    set_kind(sv[1], FD_OTHER);
  }
  return rc;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  NEXT(accept);
  PLAIN(accept);
  int s = next_accept(fd, addr, len);
  set_kind(s, FD_OTHER);
  return s;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  NEXT(accept4);
  PLAIN(accept4);
  int s = next_accept4(fd, addr, len, flags);
  set_kind(s, FD_OTHER);
  return s;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  NEXT(connect);
  PLAIN(connect);
  return next_connect(fd, addr, len);
}

ssize_t read(int fd, void *buf, size_t len) {
  NEXT(read);
  int what = decide_rw(CALL_read, read_site(fd), CALLER);
  if (what > 0) FAIL_ERRNO(what);
  return next_read(fd, buf, what == WHAT_SHORT ? shorter(len) : len);
}

ssize_t write(int fd, const void *buf, size_t len) {
  NEXT(write);
  int what = decide_rw(CALL_write, write_site(fd), CALLER);
  if (what > 0) FAIL_ERRNO(what);
  return next_write(fd, buf, what == WHAT_SHORT ? shorter(len) : len);
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
  NEXT(recv);
  PLAIN(recv);
  return next_recv(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                 struct sockaddr *addr, socklen_t *alen) {
  NEXT(recvfrom);
  PLAIN(recvfrom);
  return next_recvfrom(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags,
                       addr, alen);
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
  NEXT(send);
  PLAIN(send);
  return next_send(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
               const struct sockaddr *addr, socklen_t alen) {
  NEXT(sendto);
  PLAIN(sendto);
  return next_sendto(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags,
                     addr, alen);
}

/* A short vectored transfer: the first buffer only, itself shortened if it
 * is the only one. */
static int shorter_iov(const struct iovec *iov, int n, struct iovec *one) {
  if (n <= 0) return n;
  *one = iov[0];
  if (n == 1) one->iov_len = shorter(one->iov_len);
  return 1;
}

ssize_t readv(int fd, const struct iovec *iov, int n) {
  NEXT(readv);
  int what = decide_rw(CALL_readv, read_site(fd), CALLER);
  if (what > 0) FAIL_ERRNO(what);
  struct iovec one;
  if (what == WHAT_SHORT)
    return next_readv(fd, &one, shorter_iov(iov, n, &one));
  return next_readv(fd, iov, n);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
  NEXT(writev);
  int what = decide_rw(CALL_writev, write_site(fd), CALLER);
  if (what > 0) FAIL_ERRNO(what);
  struct iovec one;
  if (what == WHAT_SHORT)
    return next_writev(fd, &one, shorter_iov(iov, n, &one));
  return next_writev(fd, iov, n);
}

static ssize_t short_msg(ssize_t (*fn)(int, const struct msghdr *, int), int fd,
                         const struct msghdr *msg, int flags) {
  struct msghdr m = *msg;
  struct iovec one;
  m.msg_iovlen = (size_t)shorter_iov(msg->msg_iov, (int)msg->msg_iovlen, &one);
  m.msg_iov = &one;
  return fn(fd, &m, flags);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  NEXT(recvmsg);
  PLAIN(recvmsg);
  if (what == WHAT_SHORT) {
    struct iovec *saved = msg->msg_iov;
    size_t saved_len = msg->msg_iovlen;
    struct iovec one;
    msg->msg_iovlen = (size_t)shorter_iov(saved, (int)saved_len, &one);
    msg->msg_iov = &one;
    ssize_t n = next_recvmsg(fd, msg, flags);
    msg->msg_iov = saved;
    msg->msg_iovlen = saved_len;
    return n;
  }
  return next_recvmsg(fd, msg, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  NEXT(sendmsg);
  PLAIN(sendmsg);
  if (what == WHAT_SHORT) return short_msg(next_sendmsg, fd, msg, flags);
  return next_sendmsg(fd, msg, flags);
}

ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
  NEXT(sendfile);
  PLAIN(sendfile);
  return next_sendfile(out, in, offset,
                       what == WHAT_SHORT ? shorter(count) : count);
}

ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len,
               unsigned flags) {
  NEXT(splice);
  PLAIN(splice);
  return next_splice(in, in_off, out, out_off,
                     what == WHAT_SHORT ? shorter(len) : len, flags);
}

int eventfd(unsigned initval, int flags) {
  NEXT(eventfd);
  PLAIN(eventfd);
  int fd = next_eventfd(initval, flags);
  set_kind(fd, FD_EVENTFD);
  return fd;
}

/* glibc's eventfd_write writes with its internal write, which the write
 * wrapper does not see: this one counts and fails the call itself. */
int eventfd_write(int fd, eventfd_t value) {
  NEXT(eventfd_write);
  int what = decide2(CALL_eventfd_write, CALL_write_eventfd, CALLER);
  if (what > 0) FAIL_ERRNO(what);
  return next_eventfd_write(fd, value);
}

int timerfd_create(int clockid, int flags) {
  NEXT(timerfd_create);
  PLAIN(timerfd_create);
  int fd = next_timerfd_create(clockid, flags);
  set_kind(fd, FD_OTHER);
  return fd;
}

int timerfd_settime(int fd, int flags, const struct itimerspec *value,
                    struct itimerspec *old) {
  NEXT(timerfd_settime);
  PLAIN(timerfd_settime);
  return next_timerfd_settime(fd, flags, value, old);
}

int signalfd(int fd, const sigset_t *mask, int flags) {
  NEXT(signalfd);
  PLAIN(signalfd);
  int r = next_signalfd(fd, mask, flags);
  if (fd < 0) set_kind(r, FD_SIGNALFD);
  return r;
}

int pipe(int fds[2]) {
  NEXT(pipe);
  PLAIN(pipe);
  int rc = next_pipe(fds);
  if (rc == 0) {
    set_kind(fds[0], FD_PIPE);
    set_kind(fds[1], FD_PIPE);
  }
  return rc;
}

int pipe2(int fds[2], int flags) {
  NEXT(pipe2);
  PLAIN(pipe2);
  int rc = next_pipe2(fds, flags);
  if (rc == 0) {
    set_kind(fds[0], FD_PIPE);
    set_kind(fds[1], FD_PIPE);
  }
  return rc;
}

/* Not a site: only forgets what kind the descriptor was. */
int close(int fd) {
  NEXT(close);
  set_kind(fd, FD_OTHER);
  return next_close(fd);
}

/* fcntl's third argument, when there is one, is an int or a pointer: it is
 * forwarded as a word (as the C library's own wrappers do). */
int fcntl(int fd, int cmd, ...) {
  NEXT(fcntl);
  va_list ap;
  va_start(ap, cmd);
  unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  PLAIN(fcntl);
  return next_fcntl(fd, cmd, arg);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
  NEXT(setsockopt);
  PLAIN(setsockopt);
  return next_setsockopt(fd, level, name, val, len);
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len) {
  NEXT(getsockopt);
  PLAIN(getsockopt);
  return next_getsockopt(fd, level, name, val, len);
}

int aio_read(struct aiocb *cb) {
  NEXT(aio_read);
  PLAIN(aio_read);
  return next_aio_read(cb);
}

int aio_write(struct aiocb *cb) {
  NEXT(aio_write);
  PLAIN(aio_write);
  return next_aio_write(cb);
}

int aio_suspend(const struct aiocb *const list[], int n,
                const struct timespec *ts) {
  NEXT(aio_suspend);
  PLAIN(aio_suspend);
  return next_aio_suspend(list, n, ts);
}

/* Returns an errno value, not -1: see the header comment. */
int aio_error(const struct aiocb *cb) {
  static __typeof__(&aio_error) next_aio_error;
  if (!next_aio_error)
    next_aio_error = (__typeof__(&aio_error))dlsym(RTLD_NEXT, "aio_error");
  if (!next_aio_error) return ENOSYS;
  int e = next_aio_error(cb);
  if (e == EINPROGRESS) return e;
  int what = DECIDE(aio_error);
  return what > 0 ? what : e;
}

ssize_t aio_return(struct aiocb *cb) {
  NEXT(aio_return);
  ssize_t r = next_aio_return(cb); /* the request is reaped either way */
  int what = DECIDE(aio_return);
  if (what > 0) FAIL_ERRNO(what);
  return r;
}

/* pthread_create returns its error instead of setting errno. */
int pthread_create(pthread_t *t, const pthread_attr_t *attr,
                   void *(*fn)(void *), void *arg) {
  static int (*next_pthread_create)(pthread_t *, const pthread_attr_t *,
                                    void *(*)(void *), void *);
  if (!next_pthread_create)
    next_pthread_create =
        (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                 void *))dlsym(RTLD_NEXT, "pthread_create");
  if (!next_pthread_create) return ENOSYS;
  int what = DECIDE(pthread_create);
  if (what > 0) return what;
  return next_pthread_create(t, attr, fn, arg);
}

/* ---- the allocator -------------------------------------------------------
 *
 * dlsym may allocate (glibc keeps its error state in calloc'ed memory), so
 * while the real functions are being looked up, allocations come from a
 * static buffer; free and realloc recognise its blocks and never pass them
 * on.  Each block has its size in front of it, for realloc.
 */

#define BOOT_SIZE (64 * 1024)
#define BOOT_ALIGN 16

static _Alignas(4096) unsigned char boot[BOOT_SIZE];
static atomic_size_t boot_used;

static bool in_boot(const void *p) {
  return (const unsigned char *)p >= boot &&
         (const unsigned char *)p < boot + BOOT_SIZE;
}

static void *boot_alloc(size_t size) {
  size_t used, start;
  do {
    used = atomic_load(&boot_used);
    start = (used + 2 * BOOT_ALIGN - 1) & ~(size_t)(BOOT_ALIGN - 1);
    if (start > BOOT_SIZE || size > BOOT_SIZE - start) return NULL;
  } while (!atomic_compare_exchange_weak(&boot_used, &used, start + size));
  memcpy(boot + start - sizeof size, &size, sizeof size);
  return boot + start; /* static storage: already zeroed */
}

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static atomic_int resolving; /* 0 not yet, 1 under way, 2 done */

static bool resolve_allocator(void) {
  int expected = 0;
  if (atomic_load_explicit(&resolving, memory_order_acquire) == 2) return true;
  if (!atomic_compare_exchange_strong(&resolving, &expected, 1))
    return false; /* under way, perhaps in this very thread via dlsym */
  real_malloc = (__typeof__(real_malloc))dlsym(RTLD_NEXT, "malloc");
  real_calloc = (__typeof__(real_calloc))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (__typeof__(real_realloc))dlsym(RTLD_NEXT, "realloc");
  real_free = (__typeof__(real_free))dlsym(RTLD_NEXT, "free");
  if (!real_malloc || !real_calloc || !real_realloc || !real_free)
    die("libtaxifault: cannot find the C library's allocator\n");
  atomic_store_explicit(&resolving, 2, memory_order_release);
  return true;
}

static bool alloc_fails(int call, const void *caller) {
  if (decide(call, caller) == 0) return false;
  errno = ENOMEM;
  return true;
}

void *malloc(size_t size) {
  if (!resolve_allocator()) return boot_alloc(size);
  if (alloc_fails(CALL_malloc, CALLER)) return NULL;
  return real_malloc(size);
}

void *calloc(size_t n, size_t size) {
  if (!resolve_allocator())
    return size && n > SIZE_MAX / size ? NULL : boot_alloc(n * size);
  if (alloc_fails(CALL_calloc, CALLER)) return NULL;
  return real_calloc(n, size);
}

void *realloc(void *p, size_t size) {
  if (!resolve_allocator() || in_boot(p)) {
    if (!in_boot(p)) return boot_alloc(size); /* p is NULL here */
    size_t old;
    memcpy(&old, (unsigned char *)p - sizeof old, sizeof old);
    void *q = resolve_allocator() ? real_malloc(size) : boot_alloc(size);
    if (q) memcpy(q, p, old < size ? old : size);
    return q;
  }
  if (alloc_fails(CALL_realloc, CALLER)) return NULL;
  return real_realloc(p, size);
}

void free(void *p) {
  if (!p || in_boot(p)) return;
  if (resolve_allocator()) real_free(p);
}

#endif /* __linux__ && __GLIBC__ */
