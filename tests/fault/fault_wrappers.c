/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault_wrappers.c - the system calls the fault-injection
 * module wraps (see fault.c for the rules): each counts the call, fails
 * it when a rule says so, else forwards it to the next definition.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT, accept4, pipe2, splice */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

#include "fault_module.h"

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
  if (site < 0) return fault_decide(call, caller);
  fault_count(call);
  return fault_decide(site, caller);
}

/* Decide for both: the first rule that says fail wins; both are counted. */
static int decide2(int call, int site, const void *caller) {
  int what = fault_decide(site, caller);
  int plain = fault_decide(call, caller);
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
    int what = fault_decide(call, CALLER);
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

/* The batches of datagrams: "short" takes or sends half of them (at
 * least one), as the kernel may. */
int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
             struct timespec *timeout) {
  NEXT(recvmmsg);
  PLAIN(recvmmsg);
  return next_recvmmsg(fd, vec,
                       what == WHAT_SHORT ? (unsigned)shorter(vlen) : vlen,
                       flags, timeout);
}

int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags) {
  NEXT(sendmmsg);
  PLAIN(sendmmsg);
  return next_sendmmsg(
      fd, vec, what == WHAT_SHORT ? (unsigned)shorter(vlen) : vlen, flags);
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

/* Counted only, never failed: taxi_now() cannot survive a failing clock
 * (it aborts), and a count is what the tests want of it (the reads a
 * dispatched message costs). */
int clock_gettime(clockid_t id, struct timespec *ts) {
  NEXT(clock_gettime);
  fault_count(CALL_clock_gettime);
  return next_clock_gettime(id, ts);
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

#endif /* __linux__ && __GLIBC__ */
