/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/handle_map.h - native handle -> row of the demultiplexing table.
 *
 * Handles are small integers on POSIX but arbitrary pointer-sized values on
 * Windows, so the core cannot index an array by handle; this is an
 * open-addressing hash table (linear probing, deletion by backward shift so
 * no tombstones accumulate).  It is only consulted on registration and
 * removal, never while dispatching.  Not thread-safe: the reactor's lock
 * protects it.
 */
#ifndef TAXI_CORE_HANDLE_MAP_H
#define TAXI_CORE_HANDLE_MAP_H

#include "taxi/platform.h"

#include <stddef.h>
#include <stdint.h>

typedef struct taxi__handle_map {
  struct taxi__handle_map_entry {
    uint64_t key;
    uint32_t value;
    uint32_t used;
  } * entries;
  size_t cap; /* a power of two, or 0 */
  size_t count;
} taxi__handle_map_t;

void taxi__handle_map_init(taxi__handle_map_t *m);
void taxi__handle_map_destroy(taxi__handle_map_t *m);
/* 0, TAXI_EEXIST if h is present, TAXI_ENOMEM. */
int taxi__handle_map_put(taxi__handle_map_t *m, taxi_handle_t h,
                         uint32_t value);
/* 0 and *value, or TAXI_ENOENT. */
int taxi__handle_map_get(const taxi__handle_map_t *m, taxi_handle_t h,
                         uint32_t *value);
/* 0 or TAXI_ENOENT. */
int taxi__handle_map_del(taxi__handle_map_t *m, taxi_handle_t h);

#endif /* TAXI_CORE_HANDLE_MAP_H */
