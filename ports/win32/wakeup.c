/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/wakeup.c - the coalescing wake-up channel over a loopback
 * socket pair (taxi__socketpair), which select and WSAPoll can watch.
 *
 * The protocol on `pending` is the POSIX one (ports/posix/wakeup.c
 * explains why the drain reads first and clears afterwards).  A send that
 * finds the socket buffer full (WSAEWOULDBLOCK) leaves the reader end
 * readable already, which is all a wake-up has to achieve.  Windows has
 * no signal handlers, so nothing here has to be async-signal-safe.
 */
#include "config.h"

#include "win32_impl.h"

int taxi__wakeup_open(taxi__wakeup_t *w) {
  taxi_handle_t pair[2];
  int rc;

  w->read_sock = w->write_sock = TAXI_INVALID_HANDLE;
  atomic_init(&w->pending, 0);
  rc = taxi__socketpair(pair);
  if (rc < 0) return rc;
  w->read_sock = pair[0];
  w->write_sock = pair[1];
  return 0;
}

void taxi__wakeup_close(taxi__wakeup_t *w) {
  taxi__close(w->write_sock);
  taxi__close(w->read_sock);
  w->read_sock = w->write_sock = TAXI_INVALID_HANDLE;
  atomic_store(&w->pending, 0);
}

taxi_handle_t taxi__wakeup_handle(const taxi__wakeup_t *w) {
  return w->read_sock;
}

/* One byte into the channel; the last error is preserved.  Returns 0 or
 * the Winsock error. */
static int channel_write(taxi__wakeup_t *w) {
  DWORD saved = GetLastError();
  const char byte = 0;
  int err = 0;
  if (send((SOCKET)w->write_sock, &byte, 1, 0) != 1) {
    err = WSAGetLastError();
    if (err == WSAEWOULDBLOCK) err = 0;
  }
  SetLastError(saved);
  return err;
}

int taxi__wakeup_signal(taxi__wakeup_t *w) {
  if (atomic_exchange(&w->pending, 1) != 0) return 0;
  int err = channel_write(w);
  if (err != 0) {
    atomic_store(&w->pending, 0);
    return taxi__error_from_os(err);
  }
  return 1;
}

int taxi__wakeup_force(taxi__wakeup_t *w) {
  atomic_store(&w->pending, 1);
  int err = channel_write(w);
  return err ? taxi__error_from_os(err) : 1;
}

void taxi__wakeup_drain(taxi__wakeup_t *w) {
  char buf[64];
  /* Until WSAEWOULDBLOCK (or any error: nothing better to do). */
  while (recv((SOCKET)w->read_sock, buf, sizeof buf, 0) > 0) {
  }
  atomic_store(&w->pending, 0);
}
