/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/thread.c - threads over _beginthreadex, mutexes over
 * SRWLOCK (exclusive mode), condition variables over CONDITION_VARIABLE.
 *
 * _beginthreadex rather than CreateThread so the C runtime sets up its
 * per-thread state for the new thread.  SRW locks need no destruction and
 * cannot fail to lock; SleepConditionVariableSRW measures a relative time
 * in milliseconds, so an absolute deadline on taxi_now() is turned into a
 * remaining time, rounded up, and checked again on our own clock after a
 * time-out (the wait may end a little early: reported as a spurious
 * wake-up, so the caller waits again).
 */
#include "config.h"

#include "win32_impl.h"

#include <process.h>
#include <stdlib.h>

_Static_assert(sizeof(taxi__mutex_t) == sizeof(SRWLOCK) &&
                   _Alignof(taxi__mutex_t) >= _Alignof(SRWLOCK),
               "taxi__mutex_t must hold an SRWLOCK");
_Static_assert(sizeof(taxi__cond_t) == sizeof(CONDITION_VARIABLE) &&
                   _Alignof(taxi__cond_t) >= _Alignof(CONDITION_VARIABLE),
               "taxi__cond_t must hold a CONDITION_VARIABLE");
_Static_assert(sizeof(taxi__thread_id_t) == sizeof(DWORD),
               "taxi__thread_id_t must hold a DWORD");

#define SRW(m) ((PSRWLOCK)(void *)(m))
#define CV(c) ((PCONDITION_VARIABLE)(void *)(c))

/* ---- threads ----------------------------------------------------------- */

typedef struct start {
  void *(*fn)(void *);
  void *arg;
} start_t;

static unsigned __stdcall trampoline(void *p) {
  start_t s = *(start_t *)p;
  free(p);
  (void)s.fn(s.arg);
  return 0;
}

int taxi__thread_create(taxi__thread_t *t, void *(*fn)(void *), void *arg) {
  /* The C library's allocator, like pthread_create's own bookkeeping: not
   * an allocation the application's allocator hook should see. */
  start_t *s = malloc(sizeof *s);
  unsigned id;
  uintptr_t h;

  if (!s) return TAXI_ENOMEM;
  s->fn = fn;
  s->arg = arg;
  h = _beginthreadex(NULL, 0, trampoline, s, 0, &id);
  if (h == 0) {
    int rc = taxi__last_error();
    free(s);
    return rc;
  }
  t->handle = (void *)h;
  t->id = id;
  return 0;
}

int taxi__thread_join(taxi__thread_t t) {
  DWORD rc = WaitForSingleObject((HANDLE)t.handle, INFINITE);
  int ret = rc == WAIT_OBJECT_0 ? 0 : taxi__last_error();
  CloseHandle((HANDLE)t.handle);
  return ret;
}

int taxi__thread_detach(taxi__thread_t t) {
  /* The thread runs on; only the creator's handle to it goes. */
  return CloseHandle((HANDLE)t.handle) ? 0 : taxi__last_error();
}

taxi__thread_id_t taxi__thread_self(void) { return GetCurrentThreadId(); }

bool taxi__thread_equal(taxi__thread_id_t a, taxi__thread_id_t b) {
  return a == b;
}

/* ---- mutexes ----------------------------------------------------------- */

int taxi__mutex_init(taxi__mutex_t *m) {
  InitializeSRWLock(SRW(m));
  return 0;
}

void taxi__mutex_destroy(taxi__mutex_t *m) { (void)m; }

void taxi__mutex_lock(taxi__mutex_t *m) { AcquireSRWLockExclusive(SRW(m)); }

void taxi__mutex_unlock(taxi__mutex_t *m) { ReleaseSRWLockExclusive(SRW(m)); }

/* ---- condition variables ----------------------------------------------- */

int taxi__cond_init(taxi__cond_t *c) {
  InitializeConditionVariable(CV(c));
  return 0;
}

void taxi__cond_destroy(taxi__cond_t *c) { (void)c; }

void taxi__cond_wait(taxi__cond_t *c, taxi__mutex_t *m) {
  /* With INFINITE the call fails only on invalid objects. */
  if (!SleepConditionVariableSRW(CV(c), SRW(m), INFINITE, 0)) abort();
}

int taxi__cond_timedwait(taxi__cond_t *c, taxi__mutex_t *m,
                         taxi_time_t deadline) {
  taxi_time_t now = taxi_now();
  taxi_time_t rel, ms;

  if (deadline <= now) return TAXI_ETIMEDOUT;
  rel = deadline - now;
  ms = (rel + TAXI_NSEC_PER_MSEC - 1) / TAXI_NSEC_PER_MSEC;
  /* INFINITE is 0xFFFFFFFF: stay below it; a longer wait simply ends as a
   * spurious wake-up and the caller waits again. */
  if (ms > 0x7fffffff) ms = 0x7fffffff;
  if (SleepConditionVariableSRW(CV(c), SRW(m), (DWORD)ms, 0)) return 0;
  if (GetLastError() != ERROR_TIMEOUT) abort();
  return taxi_now() >= deadline ? TAXI_ETIMEDOUT : 0;
}

void taxi__cond_signal(taxi__cond_t *c) { WakeConditionVariable(CV(c)); }

void taxi__cond_broadcast(taxi__cond_t *c) { WakeAllConditionVariable(CV(c)); }
