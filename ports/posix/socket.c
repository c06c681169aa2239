/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/socket.c - file descriptor helpers: validity, non-blocking
 * and close-on-exec flags, socket pairs, pipes, close.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2(), SOCK_NONBLOCK, SOCK_CLOEXEC */
#endif
#include "config.h"

#include "port.h"
#include "signal_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int taxi__handle_check(taxi_handle_t h) {
  /* F_GETFD touches nothing and fails only with EBADF. */
  if (h < 0 || fcntl(h, F_GETFD) == -1) {
    taxi__set_os_error(EBADF);
    return TAXI_EBADF;
  }
  return 0;
}

int taxi__handle_identity(taxi_handle_t h, uint64_t *id) {
  struct stat st;
  if (h < 0 || fstat(h, &st) != 0) {
    taxi__set_os_error(EBADF);
    return TAXI_EBADF;
  }
  /* The device and the inode name the object while it is open (a socket
   * or a pipe has an inode of its own).  Folded into one word, the
   * device's bits spread away from the inode's: two objects that fold to
   * the same word are taken for one, which can only miss a reused number,
   * never invent one. */
  *id = (uint64_t)st.st_ino ^ ((uint64_t)st.st_dev * 0x9E3779B97F4A7C15ull);
  return 0;
}

int taxi__set_nonblocking(taxi_handle_t h) {
  int flags = fcntl(h, F_GETFL);
  if (flags == -1) return taxi__last_error();
  if (flags & O_NONBLOCK) return 0;
  if (fcntl(h, F_SETFL, flags | O_NONBLOCK) == -1) return taxi__last_error();
  return 0;
}

int taxi__set_cloexec(taxi_handle_t h) {
  int flags = fcntl(h, F_GETFD);
  if (flags == -1) return taxi__last_error();
  if (flags & FD_CLOEXEC) return 0;
  if (fcntl(h, F_SETFD, flags | FD_CLOEXEC) == -1) return taxi__last_error();
  return 0;
}

/* Give both descriptors of a freshly made pair the two flags; on failure
 * close them.  Where the flags have to be set afterwards, a fork()+exec()
 * in another thread between creation and here inherits the descriptors:
 * unavoidable without the atomic variants. */
static int finish_pair(int fds[2]) {
  int rc = taxi__set_nonblocking(fds[0]);
  if (rc == 0) rc = taxi__set_nonblocking(fds[1]);
  if (rc == 0) rc = taxi__set_cloexec(fds[0]);
  if (rc == 0) rc = taxi__set_cloexec(fds[1]);
  if (rc != 0) {
    taxi__close(fds[0]);
    taxi__close(fds[1]);
    fds[0] = fds[1] = -1;
  }
  return rc;
}

int taxi__socketpair(taxi_handle_t pair[2]) {
  int fds[2];
  int rc;

#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
  /* Linux >= 2.6.27, the BSDs: both flags set atomically.  A kernel older
   * than the headers rejects the type with EINVAL; fall through then. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) ==
      0) {
    pair[0] = fds[0];
    pair[1] = fds[1];
    return 0;
  }
  if (errno != EINVAL) return taxi__last_error();
#endif
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == -1) return taxi__last_error();
  rc = finish_pair(fds);
  if (rc != 0) return rc;
  pair[0] = fds[0];
  pair[1] = fds[1];
  return 0;
}

int taxi__pipe_nonblocking(int fds[2]) {
#if defined(HAVE_PIPE2)
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) return 0;
  /* ENOSYS: a kernel older than the C library (Linux < 2.6.27). */
  if (errno != ENOSYS) return taxi__last_error();
#endif
  if (pipe(fds) == -1) return taxi__last_error();
  return finish_pair(fds);
}

void taxi__close(taxi_handle_t h) {
  int saved_errno;

  if (h < 0) return;
  /* Callers close on their error paths and then report errno: keep it. */
  saved_errno = errno;
  /* Never retried.  When close() is interrupted (EINTR), Linux, the BSDs
   * and macOS have already released the descriptor (POSIX.1-2008 leaves
   * its state unspecified; POSIX.1-2024 added posix_close() because of
   * this), so a second close() could close a descriptor that another
   * thread has just been given.  EIO and friends leave nothing to do
   * either: the descriptor is gone. */
  (void)close(h);
  errno = saved_errno;
}
