/*
 * tests/fault/fault.c - an LD_PRELOAD module that makes chosen system calls
 * fail, for the fault-injection tests.
 *
 *     LD_PRELOAD=.../libtaxifault.so TAXI_FAULT=SPEC program ...
 *
 * SPEC is a comma-separated list of rules NAME:NTH[:WHAT[:COUNT[:SCOPE]]]:
 *   NAME   the call (epoll_wait, epoll_ctl, poll, select, accept, accept4,
 *          read, write, recv, send, pthread_create, ...: see `wrapped`);
 *   NTH    the first call to fail, counting from 1 after the rules were
 *          armed;
 *   WHAT   an errno name (ENOMEM, EINTR, EAGAIN, EMFILE, ENFILE, ENOBUFS,
 *          ECONNRESET, EPIPE, EBADF, EINVAL, ...; default EINTR) or
 *          "short", a transfer of half the bytes asked for (at least 1);
 *   COUNT  how many calls in a row fail from NTH on (default 1; 0: every
 *          call from NTH on, a persistent failure);
 *   SCOPE  "any" (default): every thread's calls count; "others": only the
 *          calls of threads other than the one that armed the rules, so a
 *          test can fail a pool thread's poll() while it polls itself.
 * Example: TAXI_FAULT=epoll_wait:3:ENOMEM,epoll_ctl:1:ENOMEM:2
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
 * function too: tests inject into calls only the library makes, or count
 * with that in mind.
 *
 * Linux/glibc only; elsewhere this file compiles to nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT, accept4, pipe2 */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

#include "fault.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- the calls that can be made to fail -------------------------------- */

/* X(name): one entry per wrapped function, in the order of `wrapped`. */
#define FAULT_CALLS(X) \
  X(epoll_wait)        \
  X(epoll_pwait)       \
  X(epoll_ctl)         \
  X(poll)              \
  X(ppoll)             \
  X(select)            \
  X(accept)            \
  X(accept4)           \
  X(connect)           \
  X(read)              \
  X(readv)             \
  X(recv)              \
  X(recvmsg)           \
  X(write)             \
  X(writev)            \
  X(send)              \
  X(sendmsg)           \
  X(pipe2)             \
  X(pthread_create)

enum {
#define AS_ENUM(n) CALL_##n,
  FAULT_CALLS(AS_ENUM)
#undef AS_ENUM
      NCALLS
};

static const char *const wrapped[NCALLS] = {
#define AS_NAME(n) #n,
    FAULT_CALLS(AS_NAME)
#undef AS_NAME
};

/* ---- rules ------------------------------------------------------------- */

#define MAX_RULES 16
#define WHAT_SHORT (-1) /* a short transfer instead of an error */

typedef struct rule {
  int call;            /* CALL_* */
  unsigned long nth;   /* first failing call, from 1 */
  unsigned long count; /* 0: for ever */
  int what;            /* errno value, or WHAT_SHORT */
  bool others;         /* only calls from threads but the armer count */
  atomic_ulong seen;   /* calls that counted for this rule */
} rule_t;

/* Rules are replaced as a whole under `arming`; wrappers read them without
 * a lock: a test arms before the calls it means to fail, so a wrapper racing
 * with arm sees either set, both valid (`nrules` is published last). */
static rule_t rules[MAX_RULES];
static atomic_int nrules;
static pthread_t armer; /* the thread that armed the rules */
static atomic_flag arming = ATOMIC_FLAG_INIT;

static atomic_ulong calls[NCALLS];
static atomic_ulong injected[NCALLS];

static const struct {
  const char *name;
  int value;
} errnos[] = {
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
};

static int call_index(const char *name, size_t len) {
  for (int i = 0; i < NCALLS; i++)
    if (strlen(wrapped[i]) == len && memcmp(wrapped[i], name, len) == 0)
      return i;
  return -1;
}

static int errno_value(const char *name, size_t len) {
  if (len == 5 && memcmp(name, "short", 5) == 0) return WHAT_SHORT;
  for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
    if (strlen(errnos[i].name) == len && memcmp(errnos[i].name, name, len) == 0)
      return errnos[i].value;
  return 0;
}

static bool parse_number(const char *s, size_t len, unsigned long *out) {
  if (len == 0) return false;
  unsigned long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  *out = v;
  return true;
}

/* One rule from [s, s + len).  0 or -EINVAL. */
static int parse_rule(const char *s, size_t len, rule_t *r) {
  const char *field[5] = {0};
  size_t flen[5] = {0};
  int nf = 0;
  const char *start = s;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == ':') {
      if (nf == 5) return -EINVAL;
      field[nf] = start;
      flen[nf] = (size_t)(s + i - start);
      nf++;
      start = s + i + 1;
    }
  }
  if (nf < 2) return -EINVAL;
  r->call = call_index(field[0], flen[0]);
  if (r->call < 0) return -EINVAL;
  if (!parse_number(field[1], flen[1], &r->nth) || r->nth == 0) return -EINVAL;
  r->what = EINTR;
  if (nf >= 3 && !(r->what = errno_value(field[2], flen[2]))) return -EINVAL;
  r->count = 1;
  if (nf >= 4 && !parse_number(field[3], flen[3], &r->count)) return -EINVAL;
  r->others = false;
  if (nf == 5) {
    if (flen[4] == 6 && memcmp(field[4], "others", 6) == 0)
      r->others = true;
    else if (!(flen[4] == 3 && memcmp(field[4], "any", 3) == 0))
      return -EINVAL;
  }
  return 0;
}

int taxi_fault_arm(const char *spec) {
  rule_t parsed[MAX_RULES];
  int n = 0;
  if (!spec) spec = "";
  const char *s = spec;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len > 0) {
      if (n == MAX_RULES || parse_rule(s, len, &parsed[n]) < 0) return -EINVAL;
      n++;
    }
    s += len + (end ? 1 : 0);
  }
  while (atomic_flag_test_and_set(&arming)) {
  }
  atomic_store(&nrules, 0);
  for (int i = 0; i < NCALLS; i++) {
    atomic_store(&calls[i], 0);
    atomic_store(&injected[i], 0);
  }
  for (int i = 0; i < n; i++) {
    rules[i].call = parsed[i].call;
    rules[i].nth = parsed[i].nth;
    rules[i].count = parsed[i].count;
    rules[i].what = parsed[i].what;
    rules[i].others = parsed[i].others;
    atomic_store(&rules[i].seen, 0);
  }
  armer = pthread_self();
  atomic_store(&nrules, n);
  atomic_flag_clear(&arming);
  return 0;
}

static unsigned long counter(atomic_ulong *table, const char *name) {
  int i = name ? call_index(name, strlen(name)) : -1;
  return i < 0 ? 0 : atomic_load(&table[i]);
}

unsigned long taxi_fault_calls(const char *name) {
  return counter(calls, name);
}

unsigned long taxi_fault_injected(const char *name) {
  return counter(injected, name);
}

__attribute__((constructor)) static void fault_init(void) {
  const char *spec = getenv("TAXI_FAULT");
  if (spec && taxi_fault_arm(spec) < 0) {
    static const char msg[] = "libtaxifault: bad TAXI_FAULT rule list\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(2);
  }
}

/* Count a call to `call`; returns the rule's WHAT if this call must fail,
 * else 0. */
static int decide(int call) {
  atomic_fetch_add_explicit(&calls[call], 1, memory_order_relaxed);
  int nr = atomic_load_explicit(&nrules, memory_order_acquire);
  for (int i = 0; i < nr; i++) {
    rule_t *r = &rules[i];
    if (r->call != call) continue;
    if (r->others && pthread_equal(pthread_self(), armer)) continue;
    unsigned long n =
        atomic_fetch_add_explicit(&r->seen, 1, memory_order_relaxed) + 1;
    if (n < r->nth) continue;
    if (r->count && n >= r->nth + r->count) continue;
    atomic_fetch_add_explicit(&injected[call], 1, memory_order_relaxed);
    return r->what;
  }
  return 0;
}

/* ---- the wrappers ------------------------------------------------------ */

/* The next definition of `name` (of the type of our own), looked up once. */
#define NEXT(name)                                                            \
  static __typeof__(&name) next_##name;                                       \
  if (!next_##name) next_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name); \
  if (!next_##name) {                                                         \
    errno = ENOSYS;                                                           \
    return -1;                                                                \
  }

/* Fail with errno `what` (a plain error) for calls returning -1. */
#define FAIL_ERRNO(what) \
  do {                   \
    errno = (what);      \
    return -1;           \
  } while (0)

static size_t shorter(size_t len) { return len > 1 ? len / 2 : len; }

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout) {
  NEXT(epoll_wait);
  int what = decide(CALL_epoll_wait);
  if (what > 0) FAIL_ERRNO(what);
  return next_epoll_wait(epfd, ev, max, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
                const sigset_t *mask) {
  NEXT(epoll_pwait);
  int what = decide(CALL_epoll_pwait);
  if (what > 0) FAIL_ERRNO(what);
  return next_epoll_pwait(epfd, ev, max, timeout, mask);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  NEXT(epoll_ctl);
  int what = decide(CALL_epoll_ctl);
  if (what > 0) FAIL_ERRNO(what);
  return next_epoll_ctl(epfd, op, fd, ev);
}

int poll(struct pollfd *fds, nfds_t n, int timeout) {
  NEXT(poll);
  int what = decide(CALL_poll);
  if (what > 0) FAIL_ERRNO(what);
  return next_poll(fds, n, timeout);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
          const sigset_t *mask) {
  NEXT(ppoll);
  int what = decide(CALL_ppoll);
  if (what > 0) FAIL_ERRNO(what);
  return next_ppoll(fds, n, ts, mask);
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
  NEXT(select);
  int what = decide(CALL_select);
  if (what > 0) FAIL_ERRNO(what);
  return next_select(n, r, w, e, tv);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  NEXT(accept);
  int what = decide(CALL_accept);
  if (what > 0) FAIL_ERRNO(what);
  return next_accept(fd, addr, len);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  NEXT(accept4);
  int what = decide(CALL_accept4);
  if (what > 0) FAIL_ERRNO(what);
  return next_accept4(fd, addr, len, flags);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  NEXT(connect);
  int what = decide(CALL_connect);
  if (what > 0) FAIL_ERRNO(what);
  return next_connect(fd, addr, len);
}

ssize_t read(int fd, void *buf, size_t len) {
  NEXT(read);
  int what = decide(CALL_read);
  if (what > 0) FAIL_ERRNO(what);
  return next_read(fd, buf, what == WHAT_SHORT ? shorter(len) : len);
}

ssize_t write(int fd, const void *buf, size_t len) {
  NEXT(write);
  int what = decide(CALL_write);
  if (what > 0) FAIL_ERRNO(what);
  return next_write(fd, buf, what == WHAT_SHORT ? shorter(len) : len);
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
  NEXT(recv);
  int what = decide(CALL_recv);
  if (what > 0) FAIL_ERRNO(what);
  return next_recv(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags);
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
  NEXT(send);
  int what = decide(CALL_send);
  if (what > 0) FAIL_ERRNO(what);
  return next_send(fd, buf, what == WHAT_SHORT ? shorter(len) : len, flags);
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
  int what = decide(CALL_readv);
  if (what > 0) FAIL_ERRNO(what);
  struct iovec one;
  if (what == WHAT_SHORT)
    return next_readv(fd, &one, shorter_iov(iov, n, &one));
  return next_readv(fd, iov, n);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
  NEXT(writev);
  int what = decide(CALL_writev);
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
  int what = decide(CALL_recvmsg);
  if (what > 0) FAIL_ERRNO(what);
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
  int what = decide(CALL_sendmsg);
  if (what > 0) FAIL_ERRNO(what);
  if (what == WHAT_SHORT) return short_msg(next_sendmsg, fd, msg, flags);
  return next_sendmsg(fd, msg, flags);
}

int pipe2(int fds[2], int flags) {
  NEXT(pipe2);
  int what = decide(CALL_pipe2);
  if (what > 0) FAIL_ERRNO(what);
  return next_pipe2(fds, flags);
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
  int what = decide(CALL_pthread_create);
  if (what > 0) return what;
  return next_pthread_create(t, attr, fn, arg);
}

#endif /* __linux__ && __GLIBC__ */
