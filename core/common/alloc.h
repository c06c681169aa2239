/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/alloc.h - every heap allocation in taxi goes through these, so
 * that taxi_set_allocator() sees all of them.
 */
#ifndef TAXI_CORE_ALLOC_H
#define TAXI_CORE_ALLOC_H

#include <stddef.h>

void *taxi__malloc(size_t size);
/* Zeroed; TAXI-style overflow check on n * size (NULL on overflow). */
void *taxi__calloc(size_t n, size_t size);
void *taxi__realloc(void *p, size_t size);
/* Grow an array: realloc to n * size with an overflow check. */
void *taxi__reallocarray(void *p, size_t n, size_t size);
void taxi__free(void *p);

/* A thread of taxi's that may outlive the object that made it starts
 * (before it is created) and ends (its very last step, after its last
 * free): taxi_set_allocator refuses with TAXI_EBUSY meanwhile. */
void taxi__linger_begin(void);
void taxi__linger_end(void);

#endif /* TAXI_CORE_ALLOC_H */
