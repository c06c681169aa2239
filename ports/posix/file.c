/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/file.c - facts about files the core needs without making
 * system calls itself: the size of a regular file, for the transmit-file
 * range check.
 */
#include "config.h"

#include "port.h"

#include <errno.h>
#include <sys/stat.h>

int taxi__file_size(taxi_handle_t h, int64_t *size) {
  struct stat st;
  if (h < 0 || fstat(h, &st) == -1) return taxi__last_error();
  if (!S_ISREG(st.st_mode)) return TAXI_EINVAL;
  *size = (int64_t)st.st_size;
  return 0;
}
