/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/alloc.h - the allocator hook.
 *
 * All heap memory taxi uses goes through three functions the application may
 * replace: to use its own allocator, or (as taxi's tests do) to count
 * allocations and prove that dispatching events allocates nothing.
 */
#ifndef TAXI_ALLOC_H
#define TAXI_ALLOC_H

#include "platform.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*taxi_malloc_fn)(size_t size);             /* as malloc() */
typedef void *(*taxi_realloc_fn)(void *ptr, size_t size); /* as realloc() */
typedef void (*taxi_free_fn)(void *ptr);                  /* as free() */

/*
 * taxi_set_allocator - replace the functions taxi allocates with.
 *
 * Pass all three, or all three NULL to restore malloc/realloc/free.  The
 * functions must behave like the C library's: realloc(NULL, n) allocates,
 * free(NULL) does nothing, and they must be callable from any thread.
 *
 * Returns 0, or TAXI_EINVAL if only some of the three are NULL, or
 * TAXI_EBUSY while a resolver thread of a destroyed I/O context is still
 * finishing a name lookup that could not be interrupted (taxi/resolve.h):
 * it still frees what it allocated; try again once it has ended.
 *
 * Threads: call it before any other taxi function, or while no taxi object
 * (reactor, pool, ...) exists.  Changing the functions while objects exist
 * would release memory with functions that did not allocate it, so it is
 * undefined behaviour; taxi cannot detect it.
 */
TAXI_EXTERN int taxi_set_allocator(taxi_malloc_fn m, taxi_realloc_fn r,
                                   taxi_free_fn f);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_ALLOC_H */
