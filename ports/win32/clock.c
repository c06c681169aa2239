/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/clock.c - taxi_now() over QueryPerformanceCounter, which is
 * monotonic and unaffected by changes to the wall clock.  Since Windows XP
 * neither call can fail, and the frequency is fixed at boot, so it is read
 * once.
 */
#include "config.h"

#include "win32_impl.h"

static atomic_llong frequency; /* ticks per second; 0 until first read */

TAXI_EXTERN taxi_time_t taxi_now(void) {
  LARGE_INTEGER count;
  long long f = atomic_load_explicit(&frequency, memory_order_relaxed);
  if (f == 0) {
    LARGE_INTEGER li;
    QueryPerformanceFrequency(&li);
    f = li.QuadPart;
    atomic_store_explicit(&frequency, f, memory_order_relaxed);
  }
  QueryPerformanceCounter(&count);
  /* Split so that count * 1e9 cannot overflow: whole seconds, then the
   * remainder (below f, and f * 1e9 fits 64 bits up to 9 GHz). */
  long long c = count.QuadPart;
  return (taxi_time_t)(c / f) * TAXI_NSEC_PER_SEC +
         (taxi_time_t)((c % f) * TAXI_NSEC_PER_SEC / f);
}

void taxi__sleep(taxi_time_t ns) {
  if (ns <= 0) return;
  taxi_time_t ms = (ns + TAXI_NSEC_PER_MSEC - 1) / TAXI_NSEC_PER_MSEC;
  Sleep(ms > 0x7fffffff ? 0x7fffffff : (DWORD)ms);
}
