/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/aio_reaper.c - the POSIX aio backend's reaper thread:
 * it waits in aio_suspend(3) over the requests in flight and a doorbell
 * (a pending one-byte aio_read of a pipe that submit rings), and lists
 * finished requests for wait() (docs/backends/aio.md, "Completion
 * notification").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX aio, pipe2(), signal masks under -std=c11 */
#endif
#include "config.h"

#ifdef TAXI_HAVE_AIO

#include "aio_impl.h"

#include "core/common/alloc.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the reaper --------------------------------------------------------- */

/* Keep a one-byte read of the doorbell pending, so that ringing it ends
 * the reaper's aio_suspend(). */
static void arm_bell_locked(aio_state_t *s) {
  struct aiocb *cb = &s->bell_cb;
  memset(cb, 0, sizeof *cb);
  cb->aio_fildes = s->bell[0];
  cb->aio_buf = s->bell_buf;
  cb->aio_nbytes = sizeof s->bell_buf;
  cb->aio_sigevent.sigev_notify = SIGEV_NONE;
  count(s, 1);
  if (aio_read(cb) == 0) {
    s->bell_armed = true;
    s->bell_rung = false;
  } else {
    s->bell_broken = true; /* poll instead */
  }
}

/* Take the requests that finished off the list and list their
 * completions; notice a doorbell that rang. */
static void harvest_locked(aio_state_t *s) {
  bool bell = s->bell_armed && aio_error(&s->bell_cb) != EINPROGRESS;
  /* Move the finished requests to the end of the list... */
  size_t n = s->nflight, done = 0;
  for (size_t i = 0; i < n - done;) {
    struct aiocb *cb = s->flight[i];
    if (aio_error(cb) == EINPROGRESS) {
      i++;
      continue;
    }
    done++;
    s->flight[i] = s->flight[n - done];
    s->flight[n - done] = cb;
  }
  if (!bell && !done) return;
  /* ...then take glibc's request lock once (aio_suspend() does, and
   * returns at once for a finished request): every helper that marked one
   * of them finished has left the critical section in which it still
   * reads the aiocb, which may be reused as soon as it is reported. */
  const struct aiocb *first[1] = {bell ? &s->bell_cb : s->flight[n - done]};
  struct timespec zero = {0, 0};
  aio_suspend(first, 1, &zero);
  count(s, 1);
  if (bell) {
    count(s, 2);
    if (aio_return(&s->bell_cb) <= 0) s->bell_broken = true;
    s->bell_armed = false;
    s->bell_rung = false;
  }
  for (size_t i = n - done; i < n; i++) {
    struct aiocb *cb = s->flight[i];
    int err = aio_error(cb);
    ssize_t r = aio_return(cb);
    count(s, 2);
    taxi__aio_push_done_locked(
        s, op_of_cb(cb),
        taxi__aio_settle_locked(s, op_of_cb(cb),
                                err ? aio_status(err) : (int64_t)r));
  }
  s->nflight = n - done;
  if (done) taxi__aio_kick_locked(s);
}

/* Fill the reaper's aio_suspend() list: the doorbell, then the requests
 * in flight (a rotating window of them if there are too many).  *poll is
 * set when something in flight is not covered by a wake-up. */
static size_t snapshot_locked(aio_state_t *s, bool *poll) {
  if (s->spare) {
    taxi__free(s->snap);
    s->snap = s->spare;
    s->snap_cap = s->spare_cap;
    s->spare = NULL;
  }
  size_t want = s->nflight + 1;
  if (want > AIO_SUSPEND_MAX) want = AIO_SUSPEND_MAX;
  if (s->snap_cap < want) { /* only if attach() could not make room */
    const struct aiocb **a = taxi__reallocarray(s->snap, want, sizeof *a);
    if (a) {
      s->snap = a;
      s->snap_cap = want;
    }
  }
  *poll = false;
  if (!AIO_TSAN && !s->bell_armed && !s->bell_broken) arm_bell_locked(s);
  size_t k = 0;
  if (s->bell_armed && s->snap_cap > 0)
    s->snap[k++] = &s->bell_cb;
  else
    *poll = true;
  size_t room_left = s->snap_cap - k;
  size_t take = s->nflight < room_left ? s->nflight : room_left;
  if (take < s->nflight) *poll = true;
  for (size_t i = 0; i < take; i++)
    s->snap[k++] = s->flight[(s->rotate + i) % s->nflight];
  s->rotate = take < s->nflight ? s->rotate + take : 0;
  return k;
}

/* Stop the doorbell before the pipe is closed: ring it and wait for the
 * pending read to finish. */
static void retire_bell_locked(aio_state_t *s) {
  if (!s->bell_armed) return;
  static const unsigned char one = 1;
  if (!s->bell_rung && write(s->bell[1], &one, 1) == 1) s->bell_rung = true;
  /* At least one aio_suspend(), also for a read found finished: it waits
   * for the helper to be done with the aiocb, which is freed next. */
  const struct aiocb *list[1] = {&s->bell_cb};
  do {
    taxi__mutex_unlock(&s->lock);
    aio_suspend(list, 1, NULL);
    taxi__mutex_lock(&s->lock);
  } while (aio_error(&s->bell_cb) == EINPROGRESS);
  aio_return(&s->bell_cb);
  s->bell_armed = false;
}

static void *reaper_main(void *arg) {
  aio_state_t *s = arg;
  const struct timespec poll_ts = {0, AIO_POLL_NSEC};
  taxi__mutex_lock(&s->lock);
  for (;;) {
    harvest_locked(s);
    if (s->nflight == 0) {
      if (s->stopping) break;
      s->reaper_mode = REAPER_IDLE;
      taxi__cond_wait(&s->cond, &s->lock);
      s->reaper_mode = REAPER_BUSY;
      continue;
    }
    bool poll;
    size_t n = snapshot_locked(s, &poll);
    s->reaper_mode = REAPER_SUSPENDED;
    taxi__mutex_unlock(&s->lock);
    /* Returns when one of them finished, on a signal, or after poll_ts;
     * the harvest looks at every request either way. */
    if (n > 0)
      aio_suspend(s->snap, (int)n, poll ? &poll_ts : NULL);
    else
      nanosleep(&poll_ts, NULL);
    taxi__mutex_lock(&s->lock);
    s->reaper_mode = REAPER_BUSY;
    if (n > 0) count_wait(s, 1);
  }
  retire_bell_locked(s);
  taxi__mutex_unlock(&s->lock);
  return NULL;
}

#if AIO_TSAN && defined(__GLIBC__)
static pthread_once_t tsan_once = PTHREAD_ONCE_INIT;

/* One glibc helper: it never starts another (docs/backends/aio.md,
 * "ThreadSanitizer builds"). Ignored by glibc if the process used aio before.
 */
static void tsan_one_helper(void) {
  struct aioinit init;
  memset(&init, 0, sizeof init);
  init.aio_threads = 1;
  init.aio_num = 32;
  aio_init(&init);
}
#endif

void taxi__aio_tsan_init(void) {
#if AIO_TSAN && defined(__GLIBC__)
  pthread_once(&tsan_once, tsan_one_helper);
#endif
}

/* Start the reaper with every signal blocked, so that it never takes a
 * signal the application expects elsewhere (a reactor's signalfd needs
 * its signals blocked in all threads). */
int taxi__aio_start_reaper(aio_state_t *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = taxi__thread_create(&s->reaper, reaper_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0) s->reaper_started = true;
  return rc;
}

int taxi__aio_open_bell(aio_state_t *s) {
  if (AIO_TSAN) return 0;
  /* The read end stays blocking: the pending aio_read must wait for a
   * ring, not return EAGAIN at once. */
  if (pipe2(s->bell, O_CLOEXEC) < 0) return taxi__last_error();
  return taxi__set_nonblocking(s->bell[1]);
}

/* Make the reaper's aio_suspend() list long enough for `want` requests
 * and the doorbell.  The reaper reads it without the lock while it waits:
 * then a new list is left for it to take up before its next wait. */
int taxi__aio_reserve_snap_locked(aio_state_t *s, size_t want) {
  want = want + 1 < AIO_SUSPEND_MAX ? want + 1 : AIO_SUSPEND_MAX;
  if (s->snap_cap >= want || (s->spare && s->spare_cap >= want)) return 0;
  if (s->reaper_mode != REAPER_SUSPENDED) {
    const struct aiocb **a = taxi__reallocarray(s->snap, want, sizeof *a);
    if (!a) return TAXI_ENOMEM;
    s->snap = a;
    s->snap_cap = want;
    return 0;
  }
  const struct aiocb **a = taxi__reallocarray(NULL, want, sizeof *a);
  if (!a) return TAXI_ENOMEM;
  taxi__free(s->spare);
  s->spare = a;
  s->spare_cap = want;
  return 0;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi__aio_reaper_absent;
#endif /* TAXI_HAVE_AIO */
