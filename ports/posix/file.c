/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/file.c - facts about files the core needs without making
 * system calls itself: the size of a regular file, for the transmit-file
 * range check, and reading a file at an offset (a TLS stream sends a file
 * through its engine: the kernel cannot encrypt it).
 */
#define _XOPEN_SOURCE 700 /* pread */

#include "config.h"

#include "port.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

int taxi__file_size(taxi_handle_t h, int64_t *size) {
  struct stat st;
  if (h < 0 || fstat(h, &st) == -1) return taxi__last_error();
  if (!S_ISREG(st.st_mode)) return TAXI_EINVAL;
  *size = (int64_t)st.st_size;
  return 0;
}

int64_t taxi__file_read_at(taxi_handle_t h, void *buf, size_t len,
                           int64_t off) {
  for (;;) {
    ssize_t n = pread(h, buf, len, (off_t)off);
    if (n >= 0) return (int64_t)n;
    if (errno != EINTR) return taxi__last_error();
  }
}
