/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_os.c - the POSIX side of jaws_os.h: the only file of
 * the server that includes operating-system headers.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* O_NOFOLLOW, O_CLOEXEC on older C libraries */

#include "jaws_os.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

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

int jaws_sock_blocking(taxi_handle_t s, unsigned send_timeout_ms) {
  struct timeval tv;
  int flags = fcntl(s, F_GETFL);
  if (flags == -1 || fcntl(s, F_SETFL, flags & ~O_NONBLOCK) == -1) return -1;
  tv.tv_sec = (time_t)(send_timeout_ms / 1000);
  tv.tv_usec = (suseconds_t)(send_timeout_ms % 1000) * 1000;
  return setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0 ? 0 : -1;
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

void jaws_sock_peer(taxi_handle_t s, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getpeername(s, (struct sockaddr *)&ss, &len) != 0 ||
      getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)cap, NULL, 0,
                  NI_NUMERICHOST) != 0)
    snprintf(out, cap, "-");
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

int jaws_sock_send_file(taxi_handle_t s, taxi_handle_t f, uint64_t off,
                        uint64_t len) {
  char buf[65536];
  while (len > 0) {
    size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
    if (jaws_read_at(f, buf, n, off) != 0 || jaws_sock_send(s, buf, n) != 0)
      return -1;
    off += n;
    len -= n;
  }
  return 0;
}
