/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_os.c - what jaws_os.h's two sides (jaws_os_posix.c,
 * jaws_os_win32.c) share: the copies that send a file range (waiting
 * for room, or not) where the system has no call that sends from a file,
 * or its call cannot send this one.
 */
#include "jaws_os.h"

int jaws_send_copy(taxi_handle_t s, taxi_handle_t f, uint64_t off,
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

int64_t jaws_send_copy_now(taxi_handle_t s, taxi_handle_t f, uint64_t off,
                           uint64_t len) {
  char buf[65536];
  int64_t sent = 0;
  while (len > 0) {
    size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
    int64_t went;
    if (jaws_read_at(f, buf, n, off) != 0 ||
        (went = jaws_sock_send2_now(s, buf, n, NULL, 0)) < 0)
      return -1;
    sent += went;
    /* Bytes read and not taken are read again by whoever sends on. */
    if ((size_t)went < n) break;
    off += n;
    len -= n;
  }
  return sent;
}
