/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/spares.c - a bounded free list of records of one size (see
 * spares.h).  Calls alloc.c and the ports' lock.
 */
#include "config.h"

#include "core/common/spares.h"

#include <string.h>

#include "core/common/alloc.h"

int taxi__spares_init(taxi__spares_t *sp, size_t size, unsigned max) {
  memset(sp, 0, sizeof *sp);
  sp->size = size < sizeof(void *) ? sizeof(void *) : size;
  sp->max = max;
  return taxi__mutex_init(&sp->lock);
}

void *taxi__spares_get(taxi__spares_t *sp) {
  taxi__mutex_lock(&sp->lock);
  void *p = sp->head;
  if (p) {
    memcpy(&sp->head, p, sizeof(void *));
    sp->count--;
  }
  taxi__mutex_unlock(&sp->lock);
  if (!p) return taxi__calloc(1, sp->size);
  memset(p, 0, sp->size);
  return p;
}

void taxi__spares_put(taxi__spares_t *sp, void *p) {
  if (!p) return;
  taxi__mutex_lock(&sp->lock);
  bool keep = sp->count < sp->max;
  if (keep) {
    memcpy(p, &sp->head, sizeof(void *));
    sp->head = p;
    sp->count++;
  }
  taxi__mutex_unlock(&sp->lock);
  if (!keep) taxi__free(p);
}

void taxi__spares_fini(taxi__spares_t *sp) {
  void *p = sp->head;
  while (p) {
    void *next;
    memcpy(&next, p, sizeof next);
    taxi__free(p);
    p = next;
  }
  sp->head = NULL;
  sp->count = 0;
  taxi__mutex_destroy(&sp->lock);
}
