/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault_alloc.c - the fault-injection module's malloc, calloc,
 * realloc and free (see fault.c): failed with ENOMEM when a rule says so,
 * served from a static buffer while the C library's are looked up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_NEXT */
#endif

#include <stdlib.h> /* defines __GLIBC__ */

#if defined(__linux__) && defined(__GLIBC__)

#include "fault_module.h"

/* ---- the allocator -------------------------------------------------------
 *
 * dlsym may allocate (glibc keeps its error state in calloc'ed memory), so
 * while the real functions are being looked up, allocations come from a
 * static buffer; free and realloc recognise its blocks and never pass them
 * on.  Each block has its size in front of it, for realloc.
 */

#define BOOT_SIZE (64 * 1024)
#define BOOT_ALIGN 16

static _Alignas(4096) unsigned char boot[BOOT_SIZE];
static atomic_size_t boot_used;

static bool in_boot(const void *p) {
  return (const unsigned char *)p >= boot &&
         (const unsigned char *)p < boot + BOOT_SIZE;
}

static void *boot_alloc(size_t size) {
  size_t used, start;
  do {
    used = atomic_load(&boot_used);
    start = (used + 2 * BOOT_ALIGN - 1) & ~(size_t)(BOOT_ALIGN - 1);
    if (start > BOOT_SIZE || size > BOOT_SIZE - start) return NULL;
  } while (!atomic_compare_exchange_weak(&boot_used, &used, start + size));
  memcpy(boot + start - sizeof size, &size, sizeof size);
  return boot + start; /* static storage: already zeroed */
}

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static atomic_int resolving; /* 0 not yet, 1 under way, 2 done */

static bool resolve_allocator(void) {
  int expected = 0;
  if (atomic_load_explicit(&resolving, memory_order_acquire) == 2) return true;
  if (!atomic_compare_exchange_strong(&resolving, &expected, 1))
    return false; /* under way, perhaps in this very thread via dlsym */
  real_malloc = (__typeof__(real_malloc))dlsym(RTLD_NEXT, "malloc");
  real_calloc = (__typeof__(real_calloc))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (__typeof__(real_realloc))dlsym(RTLD_NEXT, "realloc");
  real_free = (__typeof__(real_free))dlsym(RTLD_NEXT, "free");
  if (!real_malloc || !real_calloc || !real_realloc || !real_free)
    fault_die("libtaxifault: cannot find the C library's allocator\n");
  atomic_store_explicit(&resolving, 2, memory_order_release);
  return true;
}

static bool alloc_fails(int call, const void *caller) {
  if (fault_decide(call, caller) == 0) return false;
  errno = ENOMEM;
  return true;
}

void *malloc(size_t size) {
  if (!resolve_allocator()) return boot_alloc(size);
  if (alloc_fails(CALL_malloc, CALLER)) return NULL;
  return real_malloc(size);
}

void *calloc(size_t n, size_t size) {
  if (!resolve_allocator())
    return size && n > SIZE_MAX / size ? NULL : boot_alloc(n * size);
  if (alloc_fails(CALL_calloc, CALLER)) return NULL;
  return real_calloc(n, size);
}

void *realloc(void *p, size_t size) {
  if (!resolve_allocator() || in_boot(p)) {
    if (!in_boot(p)) return boot_alloc(size); /* p is NULL here */
    size_t old;
    memcpy(&old, (unsigned char *)p - sizeof old, sizeof old);
    void *q = resolve_allocator() ? real_malloc(size) : boot_alloc(size);
    if (q) memcpy(q, p, old < size ? old : size);
    return q;
  }
  if (alloc_fails(CALL_realloc, CALLER)) return NULL;
  return real_realloc(p, size);
}

void free(void *p) {
  if (!p || in_boot(p)) return;
  if (resolve_allocator()) real_free(p);
}

#endif /* __linux__ && __GLIBC__ */
