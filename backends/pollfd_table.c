/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/pollfd_table.c - the packed entry array with its snapshot, and
 * the changes to the set by handle, shared by the poll and WSAPoll
 * backends (see backends/pollfd_table.h).
 */
#include "config.h"

#include "backends/pollfd_table.h"

#include "core/common/alloc.h"

#include <limits.h>
#include <string.h>

#define PT_MIN_CAP 64u

/* Give `set` room for `need` entries.  Never shrinks. */
static int pt_reserve(taxi__pollfd_set_t *set, size_t need, size_t entry) {
  size_t cap = set->cap ? set->cap : PT_MIN_CAP;
  size_t unit = entry > sizeof *set->tokens ? entry : sizeof *set->tokens;
  void *fds;
  uint64_t *tokens;
  if (need <= set->cap) return 0;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / unit) return TAXI_ENOMEM;
    cap *= 2;
  }
  fds = taxi__realloc(set->fds, cap * entry);
  if (!fds) return TAXI_ENOMEM;
  set->fds = fds;
  tokens = taxi__realloc(set->tokens, cap * sizeof *tokens);
  if (!tokens) return TAXI_ENOMEM; /* fds keeps its larger block: harmless */
  set->tokens = tokens;
  set->cap = cap;
  return 0;
}

static void pt_free(taxi__pollfd_set_t *set) {
  taxi__free(set->fds);
  taxi__free(set->tokens);
}

static void *pt_at(const taxi__pollfd_set_t *set, size_t i, size_t entry) {
  return (char *)set->fds + i * entry;
}

int taxi__pollfd_table_init(taxi__pollfd_table_t *t, size_t entry_size,
                            const taxi__pollfd_ops_t *ops, void *ctx) {
  int rc;
  memset(t, 0, sizeof *t);
  rc = taxi__mutex_init(&t->lock);
  if (rc < 0) return rc;
  t->entry_size = entry_size;
  t->ops = ops;
  t->ctx = ctx;
  t->generation = 1; /* the empty snapshot (generation 0) is out of date */
  return 0;
}

void taxi__pollfd_table_destroy(taxi__pollfd_table_t *t) {
  pt_free(&t->live);
  pt_free(&t->snap);
  taxi__mutex_destroy(&t->lock);
}

void *taxi__pollfd_table_append(taxi__pollfd_table_t *t, uint64_t token) {
  taxi__pollfd_set_t *live = &t->live;
  size_t i = live->count;
  void *entry;
  if (pt_reserve(live, i + 1, t->entry_size) < 0) return NULL;
  entry = pt_at(live, i, t->entry_size);
  memset(entry, 0, t->entry_size);
  live->tokens[i] = token;
  live->count = i + 1;
  t->generation++;
  return entry;
}

void *taxi__pollfd_table_entry(taxi__pollfd_table_t *t, size_t i) {
  return pt_at(&t->live, i, t->entry_size);
}

bool taxi__pollfd_table_remove_at(taxi__pollfd_table_t *t, size_t i) {
  taxi__pollfd_set_t *live = &t->live;
  size_t last = live->count - 1;
  bool moved = i != last;
  if (moved) {
    memcpy(pt_at(live, i, t->entry_size), pt_at(live, last, t->entry_size),
           t->entry_size);
    live->tokens[i] = live->tokens[last];
  }
  live->count = last;
  t->generation++;
  return moved;
}

/* The events mask of entry `entry`. */
static short *pt_events(const taxi__pollfd_table_t *t, void *entry) {
  return (short *)(void *)((char *)entry + t->ops->events_offset);
}

/* An entry for h watched for `events` (lock held). */
static int pt_append(taxi__pollfd_table_t *t, taxi_handle_t h, uint64_t token,
                     unsigned events) {
  void *entry = taxi__pollfd_table_append(t, token);
  int rc;
  if (!entry) return TAXI_ENOMEM;
  rc = t->ops->where_set(t->ctx, h, (uint32_t)t->live.count);
  if (rc < 0) {
    (void)taxi__pollfd_table_remove_at(t, t->live.count - 1); /* the last */
    return rc;
  }
  t->ops->fill(entry, h);
  *pt_events(t, entry) = t->ops->mask(events);
  return 0;
}

/* Remove entry i; the last one moves into its place (lock held).  Its new
 * place replaces a known handle's, which needs no memory. */
static void pt_remove(taxi__pollfd_table_t *t, size_t i) {
  if (taxi__pollfd_table_remove_at(t, i)) {
    const void *moved = taxi__pollfd_table_entry(t, i);
    (void)t->ops->where_set(t->ctx, t->ops->handle_of(moved),
                            (uint32_t)(i + 1));
  }
}

int taxi__pollfd_table_add(taxi__pollfd_table_t *t, taxi_handle_t h,
                           uint64_t token, unsigned events) {
  int rc;
  taxi__mutex_lock(&t->lock);
  if (t->ops->where_get(t->ctx, h) != TAXI__POLLFD_UNKNOWN)
    rc = TAXI_EEXIST;
  else if (events)
    rc = pt_append(t, h, token, events);
  else
    rc = t->ops->where_set(t->ctx, h, TAXI__POLLFD_SILENT);
  taxi__mutex_unlock(&t->lock);
  return rc;
}

/* modify, and del (`forget`: no events, and h leaves the set). */
static int pt_change(taxi__pollfd_table_t *t, taxi_handle_t h, uint64_t token,
                     unsigned events, bool forget) {
  const uint32_t idle = forget ? TAXI__POLLFD_UNKNOWN : TAXI__POLLFD_SILENT;
  int rc = 0;
  uint32_t w;
  taxi__mutex_lock(&t->lock);
  w = t->ops->where_get(t->ctx, h);
  if (w == TAXI__POLLFD_UNKNOWN) {
    rc = TAXI_ENOENT;
  } else if (w == TAXI__POLLFD_SILENT) {
    if (events)
      rc = pt_append(t, h, token, events);
    else if (forget)
      (void)t->ops->where_set(t->ctx, h, idle);
  } else if (!events) {
    pt_remove(t, w - 1);
    (void)t->ops->where_set(t->ctx, h, idle);
  } else {
    short *mask = pt_events(t, taxi__pollfd_table_entry(t, w - 1));
    short want = t->ops->mask(events);
    if (*mask != want || t->live.tokens[w - 1] != token) {
      *mask = want;
      t->live.tokens[w - 1] = token;
      t->generation++;
    }
  }
  taxi__mutex_unlock(&t->lock);
  return rc;
}

int taxi__pollfd_table_modify(taxi__pollfd_table_t *t, taxi_handle_t h,
                              uint64_t token, unsigned events) {
  return pt_change(t, h, token, events, false);
}

int taxi__pollfd_table_del(taxi__pollfd_table_t *t, taxi_handle_t h) {
  return pt_change(t, h, 0, 0, true);
}

int taxi__pollfd_table_refresh(taxi__pollfd_table_t *t) {
  int rc = 0;
  taxi__mutex_lock(&t->lock);
  if (t->snap_generation != t->generation) {
    size_t n = t->live.count;
    rc = pt_reserve(&t->snap, n, t->entry_size);
    if (rc == 0) {
      if (n) {
        memcpy(t->snap.fds, t->live.fds, n * t->entry_size);
        memcpy(t->snap.tokens, t->live.tokens, n * sizeof *t->snap.tokens);
      }
      t->snap.count = n;
      t->snap_generation = t->generation;
    }
  }
  taxi__mutex_unlock(&t->lock);
  return rc;
}

int taxi__pollfd_table_wait_start(taxi__pollfd_table_t *t,
                                  const taxi__ready_t *out, size_t *max) {
  if (!out || *max == 0) return TAXI_EINVAL;
  if (*max > INT_MAX) *max = INT_MAX; /* the count comes back as an int */
  return taxi__pollfd_table_refresh(t);
}

int taxi__pollfd_table_collect(taxi__pollfd_table_t *t, int nready,
                               taxi__ready_t *out, size_t max,
                               unsigned (*events_of)(const void *entry)) {
  size_t n = t->snap.count, i, k = 0;
  int seen = 0;
  if (n == 0) return 0;
  i = t->resume < n ? t->resume : 0;
  for (size_t step = 0; step < n && seen < nready; step++) {
    size_t at = i;
    unsigned events = events_of(pt_at(&t->snap, at, t->entry_size));
    i = i + 1 < n ? i + 1 : 0;
    if (events == 0) continue;
    seen++;
    out[k].token = t->snap.tokens[at];
    out[k].events = events;
    if (++k == max) {
      t->resume = i;
      break;
    }
  }
  return (int)k;
}
