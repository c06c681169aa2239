/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/signal.c - no signal source on Windows.
 *
 * Windows delivers no POSIX signals to a process: the C runtime's
 * signal() only simulates SIGINT and SIGBREAK from console control events
 * (and SIGABRT, SIGFPE, SIGILL, SIGSEGV, SIGTERM raised by the process
 * itself).  taxi__signal_limit() therefore says 0, and
 * taxi_reactor_add_signal() / _del_signal() return TAXI_ENOTSUP; the core
 * never calls the functions below.  An application that wants Ctrl-C as an
 * event installs a console control handler (SetConsoleCtrlHandler) that
 * calls taxi_reactor_notify() or taxi_reactor_stop(), both safe from any
 * thread.
 */
#include "config.h"

#include "win32_impl.h"

int taxi__signal_limit(void) { return 0; }

int taxi__sigsrc_open(taxi__sigsrc_t *s) {
  s->unused = 0;
  return TAXI_ENOTSUP;
}

void taxi__sigsrc_close(taxi__sigsrc_t *s) { (void)s; }

taxi_handle_t taxi__sigsrc_handle(const taxi__sigsrc_t *s) {
  (void)s;
  return TAXI_INVALID_HANDLE;
}

int taxi__sigsrc_add(taxi__sigsrc_t *s, int signo) {
  (void)s;
  (void)signo;
  return TAXI_ENOTSUP;
}

int taxi__sigsrc_del(taxi__sigsrc_t *s, int signo) {
  (void)s;
  (void)signo;
  return TAXI_ENOTSUP;
}

int taxi__sigsrc_reinit_after_fork(taxi__sigsrc_t *s) {
  (void)s;
  return TAXI_ENOTSUP;
}

int taxi__sigsrc_read(taxi__sigsrc_t *s, int *out, int cap) {
  (void)s;
  (void)out;
  (void)cap;
  return TAXI_ENOTSUP;
}

int taxi__signal_take(int signo) {
  (void)signo;
  return TAXI_ENOTSUP;
}

int taxi__signal_give_back(int signo) {
  (void)signo;
  return TAXI_ENOTSUP;
}
