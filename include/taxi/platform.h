/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/platform.h - the few things that differ per operating system in the
 * public API: the native handle type, the export macro, and the time type.
 *
 * This is the only public header that looks at the platform.  Everything
 * else in include/taxi/ is written in terms of what this file defines.
 */
#ifndef TAXI_PLATFORM_H
#define TAXI_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * TAXI_EXTERN marks the functions that make up the public ABI.  The library
 * is compiled with -fvisibility=hidden, so only what carries this macro is
 * exported from the shared object (or the DLL on Windows).  TAXI_BUILDING is
 * defined only while compiling the library itself; TAXI_STATIC may be defined
 * by a consumer that links the static archive on Windows.
 */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(TAXI_BUILDING) && defined(DLL_EXPORT)
#define TAXI_EXTERN __declspec(dllexport)
#elif !defined(TAXI_BUILDING) && !defined(TAXI_STATIC)
#define TAXI_EXTERN __declspec(dllimport)
#else
#define TAXI_EXTERN
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define TAXI_EXTERN __attribute__((visibility("default")))
#else
#define TAXI_EXTERN
#endif

/*
 * taxi_handle_t is the native handle: a file descriptor on POSIX systems, a
 * SOCKET (or HANDLE) on Windows.  taxi never closes an application's handle
 * unless asked to; it only watches it.
 */
#if defined(_WIN32)
typedef uintptr_t taxi_handle_t;
#define TAXI_INVALID_HANDLE (~(uintptr_t)0) /* no handle */
#else
typedef int taxi_handle_t;
#define TAXI_INVALID_HANDLE (-1) /* no handle */
#endif

/* A point or span of time on the monotonic clock, in nanoseconds. */
typedef int64_t taxi_time_t;

#define TAXI_NSEC_PER_MSEC ((taxi_time_t)1000000)   /* ns in a millisecond */
#define TAXI_NSEC_PER_SEC ((taxi_time_t)1000000000) /* ns in a second */

/* The longest delay, period or timeout taxi accepts, in nanoseconds (about
 * 146 years); longer ones are refused with TAXI_EINVAL.  Keeping spans this
 * far below INT64_MAX leaves room to add one to any clock reading. */
#define TAXI_TIME_SPAN_MAX ((taxi_time_t)1 << 62)

/*
 * taxi_now - the monotonic clock, in nanoseconds since an unspecified start.
 * Never goes backwards; unaffected by changes to the wall clock.
 * Threads: any.
 */
TAXI_EXTERN taxi_time_t taxi_now(void);

/*
 * The initialisers of the options structures (TAXI_REACTOR_OPTIONS_INIT
 * and the others): the size set, every other field zero, which is each
 * structure's default.  In C a designated initialiser; in C++ (before
 * designated initialisers) a call to the structure's *_init function,
 * defined once per structure by TAXI__OPTIONS_DEFAULT.
 */
#ifndef __cplusplus
#define TAXI__OPTIONS_INIT(type, init) \
  { .size = sizeof(type) }
/* In C nothing: the initialiser needs no function. */
#define TAXI__OPTIONS_DEFAULT(type, init)
#else
#define TAXI__OPTIONS_INIT(type, init) (init##_default_())
#define TAXI__OPTIONS_DEFAULT(type, init) \
  static inline type init##_default_() {  \
    type o;                               \
    init(&o);                             \
    return o;                             \
  }
#endif

#ifdef __cplusplus
}
#endif

#endif /* TAXI_PLATFORM_H */
