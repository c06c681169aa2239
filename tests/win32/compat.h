/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/win32/compat.h - the POSIX calls taxi's tests make, over Winsock
 * and the C runtime, so that the same test sources build for Windows.
 *
 * The Windows build of the tests force-includes this header first
 * (-include), and puts tests/win32/include on the include path, whose
 * <poll.h>, <sys/socket.h>, <arpa/inet.h>, ... only include this one.
 * It includes every system header that declares read(), write() or
 * close() before defining those names as function-like macros, so later
 * inclusions are no-ops and the macros reach only the tests' own calls.
 *
 * Test descriptors are ints; SOCKETs fit (Windows hands out small handle
 * values, multiples of 4), and -1 stays the invalid value.  read(),
 * write() and close() act on sockets (recv, send, closesocket) and fall
 * back to the C runtime for anything else; Winsock errors become errno
 * values (WSAEWOULDBLOCK is EAGAIN), as the tests expect.  Descriptors
 * that are not sockets are file HANDLEs (see below), never C runtime
 * descriptors.
 */
#ifndef TAXI_TESTS_WIN32_COMPAT_H
#define TAXI_TESTS_WIN32_COMPAT_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0601 /* WSAPoll and struct pollfd */
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
/* <windows.h> defines these two as empty macros (16-bit pointer
 * qualifiers); the tests use them as variable names. */
#undef near
#undef far

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>
#include <pthread.h>

/* ---- errors ---------------------------------------------------------------
 */

static inline int compat_errno_from_wsa(int e) {
  switch (e) {
    case WSAEWOULDBLOCK:
      return EAGAIN;
    case WSAECONNRESET:
    case WSAECONNABORTED:
      return ECONNRESET;
    case WSAECONNREFUSED:
      return ECONNREFUSED;
    case WSAESHUTDOWN:
      return EPIPE;
    case WSAENOTSOCK:
      return EBADF;
    case WSAEINTR:
      return EINTR;
    case WSAEINPROGRESS:
    case WSAEALREADY:
      return EINPROGRESS;
    case WSAENOTCONN:
      return ENOTCONN;
    case WSAEINVAL:
      return EINVAL;
    default:
      return EIO;
  }
}

static inline int compat_is_socket(int fd) {
  int type = 0, len = sizeof type;
  if (fd < 0) return 0;
  return getsockopt((SOCKET)fd, SOL_SOCKET, SO_TYPE, (char *)&type, &len) == 0;
}

/* ---- files: HANDLEs ---------------------------------------------------------
 * A descriptor that is not a socket is a file HANDLE (taxi's files are
 * HANDLEs on Windows; the tests make theirs with CreateFile, possibly
 * with FILE_FLAG_OVERLAPPED), read and written at an offset through an
 * OVERLAPPED, waited for if the call pends. */

static inline ssize_t compat_file_io(int fd, void *buf, size_t n, long long off,
                                     int writing) {
  OVERLAPPED ov;
  DWORD got = 0;
  HANDLE h = (HANDLE)(intptr_t)fd;
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((unsigned long long)off & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((unsigned long long)off >> 32);
  ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
  /* Low bit: no completion packet if the file is on a completion port. */
  ov.hEvent = (HANDLE)((uintptr_t)ov.hEvent | 1);
  BOOL ok = writing ? WriteFile(h, buf, (DWORD)n, &got, &ov)
                    : ReadFile(h, buf, (DWORD)n, &got, &ov);
  if (!ok && GetLastError() == ERROR_IO_PENDING)
    ok = GetOverlappedResult(h, &ov, &got, TRUE);
  DWORD e = ok ? 0 : GetLastError();
  CloseHandle((HANDLE)((uintptr_t)ov.hEvent & ~(uintptr_t)1));
  if (ok) return (ssize_t)got;
  if (e == ERROR_HANDLE_EOF) return 0;
  errno = e == ERROR_INVALID_HANDLE ? EBADF : EIO;
  return -1;
}

static inline long long compat_file_size(int fd) {
  LARGE_INTEGER li;
  if (!GetFileSizeEx((HANDLE)(intptr_t)fd, &li)) return -1;
  return li.QuadPart;
}

/* ---- read, write, close ----------------------------------------------------
 */

static inline ssize_t compat_read(int fd, void *buf, size_t n) {
  if (!compat_is_socket(fd)) return compat_file_io(fd, buf, n, 0, 0);
  int r = recv((SOCKET)fd, buf, (int)(n > INT_MAX ? INT_MAX : n), 0);
  if (r < 0) errno = compat_errno_from_wsa(WSAGetLastError());
  return r;
}

static inline ssize_t compat_write(int fd, const void *buf, size_t n) {
  if (!compat_is_socket(fd))
    return compat_file_io(fd, (void *)buf, n, compat_file_size(fd), 1);
  int r = send((SOCKET)fd, buf, (int)(n > INT_MAX ? INT_MAX : n), 0);
  if (r < 0) errno = compat_errno_from_wsa(WSAGetLastError());
  return r;
}

static inline int compat_close(int fd) {
  if (compat_is_socket(fd)) return closesocket((SOCKET)fd) == 0 ? 0 : -1;
  return CloseHandle((HANDLE)(intptr_t)fd) ? 0 : -1;
}

#define read(fd, buf, n) compat_read(fd, buf, n)
#define write(fd, buf, n) compat_write(fd, buf, n)
#define close(fd) compat_close(fd)

/* ---- fcntl: non-blocking mode and validity only ---------------------------
 */

#ifndef O_NONBLOCK
#define O_NONBLOCK 0x4000
#endif
/* Descriptor numbers mean nothing for SOCKETs: moving one up fails. */
#define F_DUPFD_CLOEXEC 1030
#define F_GETFD 1
#define F_SETFD 2
#define F_GETFL 3
#define F_SETFL 4
#define FD_CLOEXEC 1

static inline int compat_fcntl(int fd, int cmd, ...) {
  long arg = 0;
  if (cmd == F_SETFL || cmd == F_SETFD) {
    va_list ap;
    va_start(ap, cmd);
    arg = (long)va_arg(ap, int);
    va_end(ap);
  }
  if (!compat_is_socket(fd)) {
    errno = EBADF;
    return -1;
  }
  if (cmd == F_DUPFD_CLOEXEC) {
    errno = EINVAL;
    return -1;
  }
  if (cmd == F_SETFL) {
    u_long on = (arg & O_NONBLOCK) ? 1 : 0;
    if (ioctlsocket((SOCKET)fd, FIONBIO, &on) != 0) {
      errno = compat_errno_from_wsa(WSAGetLastError());
      return -1;
    }
  }
  /* F_GETFL cannot be answered (Winsock has no query for FIONBIO): 0. */
  return 0;
}
#define fcntl compat_fcntl

/* ---- sockets ----------------------------------------------------------------
 */

/* Winsock must be started before the first socket call; the tests make
 * theirs directly, so socket() does it. */
static inline void compat_winsock_init(void) {
  static LONG done;
  if (InterlockedCompareExchange(&done, 1, 0) == 0) {
    WSADATA d;
    (void)WSAStartup(MAKEWORD(2, 2), &d);
  }
}

/* Winsock reports errors through WSAGetLastError(), the tests read errno. */
/* The Linux flags to socket() and accept4(); Winsock sockets are not
 * inherited across CreateProcess unless asked, so CLOEXEC needs nothing. */
#define SOCK_NONBLOCK 0x800
#define SOCK_CLOEXEC 0x80000

static inline int compat_nonblock(SOCKET s) {
  u_long on = 1;
  return ioctlsocket(s, FIONBIO, &on) == 0 ? 0 : -1;
}

static inline int compat_socket(int family, int type, int proto) {
  compat_winsock_init();
  SOCKET s = socket(family, type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC), proto);
  if (s == INVALID_SOCKET) {
    errno = compat_errno_from_wsa(WSAGetLastError());
    return -1;
  }
  if ((type & SOCK_NONBLOCK) && compat_nonblock(s) != 0) {
    errno = compat_errno_from_wsa(WSAGetLastError());
    closesocket(s);
    return -1;
  }
  return (int)s;
}

/* A non-blocking connect in progress is WSAEWOULDBLOCK on Windows,
 * EINPROGRESS on POSIX. */
static inline int compat_connect(int fd, const struct sockaddr *a, int len) {
  if (connect((SOCKET)fd, a, len) == 0) return 0;
  int e = WSAGetLastError();
  errno = e == WSAEWOULDBLOCK ? EINPROGRESS : compat_errno_from_wsa(e);
  return -1;
}

static inline int compat_accept(int fd, struct sockaddr *a, int *len) {
  SOCKET s = accept((SOCKET)fd, a, len);
  if (s == INVALID_SOCKET) {
    errno = compat_errno_from_wsa(WSAGetLastError());
    return -1;
  }
  return (int)s;
}

static inline int compat_accept4(int fd, struct sockaddr *a, int *len,
                                 int flags) {
  int s = compat_accept(fd, a, len);
  if (s >= 0 && (flags & SOCK_NONBLOCK) && compat_nonblock((SOCKET)s) != 0) {
    errno = compat_errno_from_wsa(WSAGetLastError());
    closesocket((SOCKET)s);
    return -1;
  }
  return s;
}

#define socket(f, t, p) compat_socket(f, t, p)
#define accept4(fd, a, len, flags) compat_accept4(fd, a, len, flags)
#define connect(fd, a, len) compat_connect(fd, a, len)
#define accept(fd, a, len) compat_accept(fd, a, len)

/* Winsock passes option values as char pointers, and takes the socket
 * time-outs as a DWORD of milliseconds where POSIX takes a timeval. */
static inline int compat_setsockopt(int fd, int level, int name,
                                    const void *val, int len) {
  if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
      len == (int)sizeof(struct timeval)) {
    const struct timeval *tv = val;
    DWORD ms = (DWORD)(tv->tv_sec * 1000 + tv->tv_usec / 1000);
    return setsockopt((SOCKET)fd, level, name, (const char *)&ms, sizeof ms);
  }
  return setsockopt((SOCKET)fd, level, name, (const char *)val, len);
}
#define setsockopt(s, level, name, val, len) \
  compat_setsockopt(s, level, name, val, (int)(len))
#define getsockopt(s, level, name, val, len) \
  getsockopt(s, level, name, (char *)(val), len)

#define send(s, buf, n, flags) send(s, (const char *)(buf), (int)(n), flags)
#define recv(s, buf, n, flags) recv(s, (char *)(buf), (int)(n), flags)

#define MSG_NOSIGNAL 0
#define SHUT_RD SD_RECEIVE
#define SHUT_WR SD_SEND
#define SHUT_RDWR SD_BOTH
typedef ULONG nfds_t;
#define poll(fds, n, ms) WSAPoll(fds, (ULONG)(n), ms)

/* ---- signals the tests name (none can be delivered) -------------------------
 */

#ifndef SIGUSR1
#define SIGUSR1 30
#endif
#ifndef SIGUSR2
#define SIGUSR2 31
#endif
#ifndef SIGPIPE
#define SIGPIPE 13
#endif
#ifndef SIGHUP
#define SIGHUP 1
#endif
#ifndef SIGKILL
#define SIGKILL 9
#endif
#ifndef SIGALRM
#define SIGALRM 14
#endif

/* ---- files at offsets
 * ---------------------------------------------------------
 */

static inline ssize_t compat_pread(int fd, void *buf, size_t n, off_t off) {
  return compat_file_io(fd, buf, n, (long long)off, 0);
}
static inline ssize_t compat_pwrite(int fd, const void *buf, size_t n,
                                    off_t off) {
  return compat_file_io(fd, (void *)buf, n, (long long)off, 1);
}
#define pread(fd, buf, n, off) compat_pread(fd, buf, n, off)
#define pwrite(fd, buf, n, off) compat_pwrite(fd, buf, n, off)

#define _SC_NPROCESSORS_ONLN 84
static inline long compat_sysconf(int name) {
  SYSTEM_INFO si;
  if (name != _SC_NPROCESSORS_ONLN) return -1;
  GetSystemInfo(&si);
  return (long)si.dwNumberOfProcessors;
}
#define sysconf(name) compat_sysconf(name)

/* ---- environment
 * -------------------------------------------------------------
 */

static inline int compat_setenv(const char *name, const char *value, int over) {
  if (!over && getenv(name)) return 0;
  return _putenv_s(name, value) == 0 ? 0 : -1;
}
static inline int compat_unsetenv(const char *name) {
  return _putenv_s(name, "") == 0 ? 0 : -1;
}
#define setenv(n, v, o) compat_setenv(n, v, o)
#define unsetenv(n) compat_unsetenv(n)

#endif /* TAXI_TESTS_WIN32_COMPAT_H */
