/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/posix/signal_impl.h - private to the POSIX port: the signal limit,
 * the signal source's split between signal.c and its two mechanisms, and
 * the non-blocking pipe they share with the wake-up channel.  Include
 * after config.h and port.h.
 */
#ifndef TAXI_PORTS_POSIX_SIGNAL_IMPL_H
#define TAXI_PORTS_POSIX_SIGNAL_IMPL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * One more than the largest signal number.  NSIG means that almost
 * everywhere, but FreeBSD and DragonFly keep NSIG at the historical 32 while
 * their real-time signals go up to _SIG_MAXSIG (128).
 */
#if defined(_SIG_MAXSIG)
#define TAXI__NSIG (_SIG_MAXSIG + 1)
#elif defined(NSIG)
#define TAXI__NSIG NSIG
#elif defined(_NSIG)
#define TAXI__NSIG _NSIG
#else
#error "cannot tell the number of signals: NSIG is not defined"
#endif

_Static_assert(TAXI__NSIG <= TAXI__SIGNAL_BITS,
               "signal numbers must fit the signal source's bitmaps");

/* A pipe whose two ends are non-blocking and close-on-exec (socket.c). */
int taxi__pipe_nonblocking(int fds[2]);

/* ---- signal sources (signal.c and the two mechanisms) -------------------
 * signal.c validates the signal number, enforces one owner per signal in
 * the process, keeps s->added and dispatches on s->kind.  The mechanisms
 * may assume a catchable signo claimed by s; add() is called before signo
 * is put into s->added, del() after it was taken out. */

static inline bool taxi__sigbit_test(const uint64_t *bits, int signo) {
  return (bits[signo / 64] >> (signo % 64)) & 1u;
}

static inline void taxi__sigbit_set(uint64_t *bits, int signo) {
  bits[signo / 64] |= (uint64_t)1 << (signo % 64);
}

static inline void taxi__sigbit_clear(uint64_t *bits, int signo) {
  bits[signo / 64] &= ~((uint64_t)1 << (signo % 64));
}

/* Make signo this process's only user of it (signal.c): TAXI_EINVAL for a
 * signal that cannot be caught, TAXI_EBUSY when a source or a taker
 * (signal_taken.c) has it already.  taxi__sigunclaim gives it up. */
int taxi__sigclaim(int signo);
void taxi__sigunclaim(int signo);

/* Take and drop every instance of signo pending for the process or the
 * calling thread (signal.c), whether or not the thread blocks it.  Called
 * by an owner giving signo back, before it restores the disposition it
 * replaced: an instance sent to the process while some thread has signo
 * unblocked waits in the process's pending set until that thread takes
 * it, and must not meet the restored disposition (often the default
 * action, ending the process) when it was sent to the owner.  The kernel
 * takes a pending signal and reads its disposition in one step, so once
 * this returns, each earlier instance is either dropped or already on its
 * way to the owner's handler.  A no-op where sigtimedwait() is missing
 * (macOS); there the owners rely on their handler staying installed while
 * they unblock. */
void taxi__sig_discard_pending(int signo);

#ifdef HAVE_SIGNALFD
int taxi__sigsrc_fd_open(taxi__sigsrc_t *s);
int taxi__sigsrc_fd_add(taxi__sigsrc_t *s, int signo);
int taxi__sigsrc_fd_del(taxi__sigsrc_t *s, int signo);
int taxi__sigsrc_fd_read(taxi__sigsrc_t *s, int *out, int cap);
/* New descriptors for s (its signalfd, self-pipe and epoll set) after
 * fork; the old ones are left open. */
int taxi__sigsrc_fd_reopen(taxi__sigsrc_t *s);
#endif

int taxi__sigsrc_pipe_open(taxi__sigsrc_t *s);
/* A new self-pipe in s->pipe_fd and s->write_fd; an old one is left
 * open. */
int taxi__sigsrc_pipe_make(taxi__sigsrc_t *s);
/* After fork, once s has a new pipe: point s's signals that use a pipe at
 * it. */
void taxi__sigsrc_pipe_repoint(const taxi__sigsrc_t *s);
int taxi__sigsrc_pipe_add(taxi__sigsrc_t *s, int signo);
int taxi__sigsrc_pipe_del(taxi__sigsrc_t *s, int signo);
/* Waits until no signal handler is still writing to s's pipe; call after
 * every signal of s was deleted and before closing the pipe. */
void taxi__sigsrc_pipe_quiesce(void);
int taxi__sigsrc_pipe_read(taxi__sigsrc_t *s, int *out, int cap);

#endif /* TAXI_PORTS_POSIX_SIGNAL_IMPL_H */
