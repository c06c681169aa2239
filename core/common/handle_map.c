/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/handle_map.c - open-addressing map from native handle to table
 * row.
 */
#include "config.h"

#include "core/common/handle_map.h"
#include "core/common/alloc.h"
#include "taxi/error.h"

#include <string.h>

/* splitmix64's finaliser: descriptors are dense small integers and Windows
 * SOCKETs are multiples of 4, so the raw value would cluster. */
static size_t hash(uint64_t key, size_t mask) {
  key ^= key >> 30;
  key *= 0xbf58476d1ce4e5b9ull;
  key ^= key >> 27;
  key *= 0x94d049bb133111ebull;
  key ^= key >> 31;
  return (size_t)key & mask;
}

static uint64_t key_of(taxi_handle_t h) { return (uint64_t)h; }

void taxi__handle_map_init(taxi__handle_map_t *m) { memset(m, 0, sizeof *m); }

void taxi__handle_map_destroy(taxi__handle_map_t *m) {
  taxi__free(m->entries);
  memset(m, 0, sizeof *m);
}

static size_t find_slot(const taxi__handle_map_t *m, uint64_t key) {
  size_t mask = m->cap - 1;
  size_t i = hash(key, mask);
  while (m->entries[i].used && m->entries[i].key != key) i = (i + 1) & mask;
  return i;
}

static int grow(taxi__handle_map_t *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  struct taxi__handle_map_entry *old = m->entries;
  size_t ocap = m->cap;
  struct taxi__handle_map_entry *fresh = taxi__calloc(ncap, sizeof *fresh);
  if (!fresh) return TAXI_ENOMEM;
  m->entries = fresh;
  m->cap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    if (!old[i].used) continue;
    m->entries[find_slot(m, old[i].key)] = old[i];
  }
  taxi__free(old);
  return 0;
}

int taxi__handle_map_put(taxi__handle_map_t *m, taxi_handle_t h,
                         uint32_t value) {
  /* Keep the load at or under one half so probe sequences stay short. */
  if ((m->count + 1) * 2 > m->cap) {
    int rc = grow(m);
    if (rc < 0) return rc;
  }
  uint64_t key = key_of(h);
  size_t i = find_slot(m, key);
  if (m->entries[i].used) return TAXI_EEXIST;
  m->entries[i].key = key;
  m->entries[i].value = value;
  m->entries[i].used = 1;
  m->count++;
  return 0;
}

int taxi__handle_map_get(const taxi__handle_map_t *m, taxi_handle_t h,
                         uint32_t *value) {
  if (!m->cap) return TAXI_ENOENT;
  size_t i = find_slot(m, key_of(h));
  if (!m->entries[i].used) return TAXI_ENOENT;
  *value = m->entries[i].value;
  return 0;
}

int taxi__handle_map_del(taxi__handle_map_t *m, taxi_handle_t h) {
  if (!m->cap) return TAXI_ENOENT;
  size_t mask = m->cap - 1;
  size_t i = find_slot(m, key_of(h));
  if (!m->entries[i].used) return TAXI_ENOENT;
  /* Backward-shift deletion: move later members of the probe run into the
   * hole when their home position allows it, so lookups never need to skip
   * deleted entries. */
  size_t j = i;
  for (;;) {
    m->entries[i].used = 0;
    for (;;) {
      j = (j + 1) & mask;
      if (!m->entries[j].used) {
        m->count--;
        return 0;
      }
      size_t home = hash(m->entries[j].key, mask);
      /* Leave entry j where it is if its home lies cyclically in (i, j]. */
      if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
      break;
    }
    m->entries[i] = m->entries[j];
    i = j;
  }
}
