/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_os_posix.c - jaws_os.h on POSIX systems: file
 * descriptors and sockets; a file range goes by sendfile(2) on Linux
 * (the socket corked around it), FreeBSD and macOS (the head in the same
 * call), by a read and a send elsewhere.  (jaws_os_win32.c is the other
 * side.)
 */
#if !defined(__FreeBSD__) && !defined(__APPLE__)
/* FreeBSD's and macOS's headers hide sendfile(2) and struct sf_hdtr from
 * a program that asks for a POSIX level; by default they show them. */
#define _POSIX_C_SOURCE 200809L
#endif
#define _DEFAULT_SOURCE /* O_NOFOLLOW, O_CLOEXEC on older C libraries */
#define _GNU_SOURCE     /* accept4 */

#include "jaws_os.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/sendfile.h>
#endif

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored (echo_net_init) */
#endif

int64_t jaws_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t jaws_wall_s(void) { return (int64_t)time(NULL); }

/* Seconds and nanoseconds as nanoseconds, saturated (a file's times are
 * whatever was set: utimensat takes any 64-bit second). */
static int64_t ns_of(int64_t sec, long nsec) {
  if (sec >= INT64_MAX / 1000000000 - 1) return INT64_MAX;
  if (sec <= INT64_MIN / 1000000000 + 1) return INT64_MIN;
  return sec * 1000000000 + nsec;
}

int64_t jaws_wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ns_of((int64_t)ts.tv_sec, ts.tv_nsec);
}

static int os_status(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
      return JAWS_OS_NOENT;
    case EACCES:
    case EPERM:
    case ELOOP:
      return JAWS_OS_DENIED;
    default:
      return JAWS_OS_ERROR;
  }
}

int jaws_resolve(const char *path, char *out, size_t cap) {
  char *r = realpath(path, NULL);
  if (r == NULL) return os_status(errno);
  if (strlen(r) >= cap) {
    free(r);
    return JAWS_OS_NOENT;
  }
  strcpy(out, r);
  free(r);
  return JAWS_OS_OK;
}

static void fill(struct jaws_stat *st, const struct stat *sb) {
  st->kind = S_ISREG(sb->st_mode)   ? JAWS_REGULAR
             : S_ISDIR(sb->st_mode) ? JAWS_DIRECTORY
                                    : JAWS_OTHER;
  st->size = (uint64_t)sb->st_size;
  st->dev = (uint64_t)sb->st_dev;
  st->ino = (uint64_t)sb->st_ino;
  st->mtime = (int64_t)sb->st_mtime;
#if defined(__APPLE__)
  st->mtime_ns =
      ns_of((int64_t)sb->st_mtimespec.tv_sec, sb->st_mtimespec.tv_nsec);
  st->ctime_ns =
      ns_of((int64_t)sb->st_ctimespec.tv_sec, sb->st_ctimespec.tv_nsec);
#else
  st->mtime_ns = ns_of((int64_t)sb->st_mtim.tv_sec, sb->st_mtim.tv_nsec);
  st->ctime_ns = ns_of((int64_t)sb->st_ctim.tv_sec, sb->st_ctim.tv_nsec);
#endif
}

int jaws_stat(const char *path, struct jaws_stat *st) {
  struct stat sb;
  if (stat(path, &sb) != 0) return os_status(errno);
  fill(st, &sb);
  return JAWS_OS_OK;
}

int jaws_open(const char *path, taxi_handle_t *out, struct jaws_stat *st) {
  struct stat sb;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return os_status(errno);
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return os_status(err);
  }
  fill(st, &sb);
  *out = fd;
  return JAWS_OS_OK;
}

void jaws_close(taxi_handle_t f) {
  if (f != TAXI_INVALID_HANDLE) close(f);
}

int jaws_read_at(taxi_handle_t f, void *buf, size_t len, uint64_t off) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = pread(f, p, len, (off_t)off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}

int jaws_sock_wait(taxi_handle_t s, int timeout_ms) {
  struct pollfd one = {.fd = s, .events = POLLIN};
  int rc = poll(&one, 1, timeout_ms);
  if (rc < 0) return errno == EINTR ? 0 : -1;
  return rc > 0 ? 1 : 0;
}

long jaws_sock_recv(taxi_handle_t s, void *buf, size_t cap) {
  for (;;) {
    ssize_t n = recv(s, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? -1 : (long)n;
  }
}

int jaws_sock_send(taxi_handle_t s, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(s, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Past the `done` bytes a gathering send of two pieces took. */
static void iov2_advance(struct iovec iov[2], size_t done) {
  for (int i = 0; i < 2; i++) {
    size_t d = done < iov[i].iov_len ? done : iov[i].iov_len;
    iov[i].iov_base = (char *)iov[i].iov_base + d;
    iov[i].iov_len -= d;
    done -= d;
  }
}

int jaws_sock_send2(taxi_handle_t s, const void *a, size_t alen, const void *b,
                    size_t blen) {
  struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  while (iov[0].iov_len + iov[1].iov_len > 0) {
    ssize_t n = sendmsg(s, &m, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1; /* an error, or the send timeout */
    iov2_advance(iov, (size_t)n);
  }
  return 0;
}

/* One gathering send of a[alen] and b[blen] as far as the socket takes
 * them now; `more`: MSG_MORE where there is one (more bytes follow at
 * once: no part-filled segment for the head alone). */
static int64_t send2_now(int s, const void *a, size_t alen, const void *b,
                         size_t blen, bool more) {
  struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
  struct msghdr m;
  int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
  int64_t sent = 0;
#if defined(MSG_MORE)
  if (more) flags |= MSG_MORE;
#else
  (void)more;
#endif
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  while (iov[0].iov_len + iov[1].iov_len > 0) {
    ssize_t n = sendmsg(s, &m, flags);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break; /* full */
    if (n <= 0) return -1;
    sent += n;
    iov2_advance(iov, (size_t)n);
  }
  return sent;
}

int64_t jaws_sock_send2_now(taxi_handle_t s, const void *a, size_t alen,
                            const void *b, size_t blen) {
  return send2_now(s, a, alen, b, blen, false);
}

int64_t jaws_sock_send_now(taxi_handle_t s, const void *head, size_t head_len,
                           const void *data, taxi_handle_t f, uint64_t off,
                           uint64_t len) {
  if (data || len == 0)
    return send2_now(s, head, head_len, data, (size_t)len, false);
  int64_t sent = send2_now(s, head, head_len, NULL, 0, true);
  if (sent < (int64_t)head_len) return sent; /* full, or an error */
#if defined(__linux__)
  /* sendfile(2) takes no flags: it waits for room on a blocking socket
   * (up to SO_SNDTIMEO), and not on a non-blocking one.  Three fcntl
   * calls per file sent (64 KiB and more: smaller ones are in memory),
   * against a wait on a client. */
  int fl = fcntl(s, F_GETFL);
  if (fl == -1) return -1;
  if (!(fl & O_NONBLOCK) && fcntl(s, F_SETFL, fl | O_NONBLOCK) == -1) return -1;
  while (len > 0) {
    off_t o = (off_t)off;
    size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
    ssize_t n = sendfile(s, f, &o, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break; /* full */
    if (n <= 0) { /* an error, or a file that shrank */
      sent = -1;
      break;
    }
    sent += n;
    off += (uint64_t)n;
    len -= (uint64_t)n;
  }
  if (!(fl & O_NONBLOCK) && fcntl(s, F_SETFL, fl) == -1) return -1;
  return sent;
#else
  int64_t body = jaws_send_copy_now(s, f, off, len);
  return body < 0 ? -1 : sent + body;
#endif
}

#if defined(__FreeBSD__) || defined(__APPLE__)
/* FreeBSD's and macOS's sendfile(2): the head goes as the call's header
 * (struct sf_hdtr), in a segment with the file's first bytes.  A call cut
 * short by a signal or the send timeout (EINTR, EAGAIN) says how many
 * bytes went, head first: the loop goes on from there, without the part
 * of the head that went.  0 sent, -1 error (the send timeout with nothing
 * sent, a file that shrank), 1 sendfile cannot send this (nothing went:
 * the caller copies). */
static int sendfile_hdtr(int s, const void *head, size_t head_len, int f,
                         uint64_t off, uint64_t len) {
  struct iovec hv = {(void *)head, head_len};
  bool started = false;
  while (len > 0) { /* (a length of 0 would send up to the end of file) */
    struct sf_hdtr hdtr = {hv.iov_len ? &hv : NULL, hv.iov_len ? 1 : 0, NULL,
                           0};
    size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
    off_t sent = 0;
#if defined(__FreeBSD__)
    int rc = sendfile(f, s, (off_t)off, want, &hdtr, &sent, 0);
#else
    sent = (off_t)(hv.iov_len + want); /* in: the head's and file's bytes */
    int rc = sendfile(f, s, (off_t)off, &sent, &hdtr, 0);
#endif
    int err = rc == 0 ? 0 : errno;
    if (err != 0 && err != EINTR && err != EAGAIN)
      return !started && (err == ENOTSOCK || err == EOPNOTSUPP ||
                          err == ENOTSUP || err == EINVAL)
                 ? 1
                 : -1;
    if (sent <= 0) {
      if (err == EINTR) continue;
      return -1; /* the send timeout, or the file ended early */
    }
    started = true;
    size_t h = (size_t)sent < hv.iov_len ? (size_t)sent : hv.iov_len;
    hv.iov_base = (char *)hv.iov_base + h;
    hv.iov_len -= h;
    off += (uint64_t)sent - h;
    len -= (uint64_t)sent - h;
  }
  return jaws_sock_send(s, hv.iov_base, hv.iov_len); /* a head alone */
}
#endif

int jaws_sock_send_file(taxi_handle_t s, const void *head, size_t head_len,
                        taxi_handle_t f, uint64_t off, uint64_t len) {
#if defined(__linux__)
  /* The socket has TCP_NODELAY, for small responses; a file goes corked,
   * so that it leaves in full segments even where the send waits for
   * room (uncorked, each wait pushes out a part-filled one, and every
   * segment costs the receiver a wake-up), and the head with its first
   * bytes.  Uncorking sends the rest. */
  const char *p = head;
  int on = 1, no = 0;
  bool corked =
      len > 0 && setsockopt(s, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
  while (head_len > 0) {
    ssize_t n = send(s, p, head_len, MSG_NOSIGNAL | (len ? MSG_MORE : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    head_len -= (size_t)n;
  }
  while (len > 0) {
    off_t o = (off_t)off;
    size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
    ssize_t n = sendfile(s, f, &o, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1; /* an error, the send timeout, or a shrunk file */
    off += (uint64_t)n;
    len -= (uint64_t)n;
  }
  if (corked && setsockopt(s, IPPROTO_TCP, TCP_CORK, &no, sizeof no) != 0)
    return -1;
  return 0;
#else
#if defined(__FreeBSD__) || defined(__APPLE__)
  int rc = sendfile_hdtr(s, head, head_len, f, off, len);
  if (rc <= 0) return rc;
#endif
  if (jaws_sock_send(s, head, head_len) != 0) return -1;
  return jaws_send_copy(s, f, off, len);
#endif
}

static int set_timeout(taxi_handle_t s, int which, unsigned ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
  return setsockopt(s, SOL_SOCKET, which, &tv, sizeof tv);
}

int jaws_sock_accept_waits(taxi_handle_t l, unsigned send_timeout_ms,
                           int wait_ms) {
#if defined(__linux__)
  /* Linux times a blocking accept() out by the listener's SO_RCVTIMEO
   * (socket(7)), and an accepted socket starts with the listener's
   * options; other systems may wait for ever. */
  int flags = fcntl(l, F_GETFL), on = 1;
  if (flags == -1 || set_timeout(l, SO_RCVTIMEO, (unsigned)wait_ms) != 0 ||
      set_timeout(l, SO_SNDTIMEO, send_timeout_ms) != 0 ||
      setsockopt(l, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0 ||
      fcntl(l, F_SETFL, flags & ~O_NONBLOCK) == -1)
    return 0;
  return 1;
#else
  (void)l;
  (void)send_timeout_ms;
  (void)wait_ms;
  return 0;
#endif
}

/* Did s start with the options jaws_sock_accept_waits gave its listener l?
 * Asked once (Linux copies them to an accepted socket; should a kernel
 * not, each socket gets them set).  Compared with what l itself reads
 * back, not with the wait asked for: the kernel keeps a timeout in clock
 * ticks, so 5 ms may read back as 8. */
static bool inherits_options(int l, int s) {
  static atomic_int known = -1;
  int k = atomic_load(&known);
  if (k < 0) {
    struct timeval lt, st;
    socklen_t llen = sizeof lt, slen = sizeof st;
    k = getsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &lt, &llen) == 0 &&
        getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &st, &slen) == 0 &&
        (lt.tv_sec != 0 || lt.tv_usec != 0) && lt.tv_sec == st.tv_sec &&
        lt.tv_usec == st.tv_usec;
    atomic_store(&known, k);
  }
  return k == 1;
}

int jaws_sock_accept(taxi_handle_t l, bool prepared, taxi_handle_t *out,
                     char *peer, size_t cap, unsigned send_timeout_ms,
                     int wait_ms) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int on = 1, s;
#if defined(__linux__)
  /* Blocking (a Linux socket does not inherit O_NONBLOCK from its
   * listener) and close-on-exec in the one call. */
  while ((s = accept4(l, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC)) < 0 &&
         errno == EINTR) {
  }
#else
  while ((s = accept(l, (struct sockaddr *)&ss, &len)) < 0 && errno == EINTR) {
  }
#endif
  if (s < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED ||
                   errno == EPROTO
               ? 0
               : -1;
  /* cap 0: no one reads the address (no access log), and formatting it
   * costs a few percent of a small request's CPU. */
  if (cap > 0 && getnameinfo((struct sockaddr *)&ss, len, peer, (socklen_t)cap,
                             NULL, 0, NI_NUMERICHOST) != 0)
    snprintf(peer, cap, "-");
#if !defined(__linux__)
  int flags = fcntl(s, F_GETFD), fl = fcntl(s, F_GETFL);
  if (flags == -1 || fl == -1 || fcntl(s, F_SETFD, flags | FD_CLOEXEC) == -1 ||
      fcntl(s, F_SETFL, fl & ~O_NONBLOCK) == -1) {
    close(s);
    return -1;
  }
#endif
  if (prepared && inherits_options(l, s)) {
    *out = s;
    return 1;
  }
  (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (set_timeout(s, SO_SNDTIMEO, send_timeout_ms) != 0 ||
      set_timeout(s, SO_RCVTIMEO, (unsigned)wait_ms) != 0) {
    close(s);
    return -1;
  }
  *out = s;
  return 1;
}

int jaws_sock_defer_accept(taxi_handle_t l, unsigned secs) {
#if defined(__linux__) && defined(TCP_DEFER_ACCEPT)
  /* tcp(7): the kernel keeps a connection whose handshake ended without
   * data out of the accept queue until its first bytes come, or until
   * it has resent its SYN-ACK for about secs seconds and the client
   * answered (it is then accepted anyway). */
  int v = (int)secs;
  return setsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof v) == 0 ? 1
                                                                         : -1;
#else
  (void)l;
  (void)secs;
  return 0;
#endif
}

unsigned jaws_sock_backlog(taxi_handle_t l) {
#if defined(__linux__)
  /* For a listening socket tcpi_unacked is its accept queue's length. */
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(l, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0)
    return ti.tcpi_unacked;
#else
  (void)l;
#endif
  return 0;
}

long jaws_sock_recv_timed(taxi_handle_t s, void *buf, size_t cap, int wait_ms) {
  /* The wait is the socket's SO_RCVTIMEO, set at the accept. */
  int flags = wait_ms == 0 ? MSG_DONTWAIT : 0;
  for (;;) {
    ssize_t n = recv(s, buf, cap, flags);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return JAWS_SOCK_TIMEOUT;
    return n < 0 ? -1 : (long)n;
  }
}

int jaws_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  /* The new thread takes no signals: the dispatcher reads SIGINT and
   * SIGTERM from a signalfd, which only works while every thread blocks
   * them (a thread that does not would take and drop them when they are
   * ignored, as in a background job of a shell). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

unsigned jaws_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < UINT_MAX ? (unsigned)n : 1u;
}
