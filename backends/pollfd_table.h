/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backends/pollfd_table.h - the set of a poll()-shaped backend: a packed
 * array of poll entries (struct pollfd for backends/poll.c, WSAPOLLFD for
 * backends/wsapoll.c: the entry type is the backend's, this table knows
 * only its size) with the token of each entry, index for index.
 *
 * The live set is changed under `lock` by add/modify/del; the waiting
 * thread polls a private copy (the snapshot) brought up to date only when
 * the live set changed since the last wait, so waits run without the
 * caller's lock and an unchanged set costs no copy.  One thread waits at
 * a time (the backends do not claim TAXI_CAP_MULTI_WAIT), so the snapshot
 * needs no lock of its own.
 *
 * The changes by handle (add, modify, del) are made here too; where each
 * handle sits (descriptor-indexed on POSIX, a hash map of SOCKETs on
 * Windows) and an entry's fields are the backend's (taxi__pollfd_ops_t).
 */
#ifndef TAXI_BACKENDS_POLLFD_TABLE_H
#define TAXI_BACKENDS_POLLFD_TABLE_H

#include "readiness.h"

#include "ports/port.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A handle's place in the set (taxi__pollfd_ops_t.where_get), when it is
 * not its entry's position + 1. */
#define TAXI__POLLFD_UNKNOWN 0u /* not in the set */
#define TAXI__POLLFD_SILENT \
  UINT32_MAX /* in it, watched for nothing: no entry */

/* What the table asks of its backend to change the set by handle: where
 * each handle's entry sits, and the fields of an entry.  Called with the
 * table's lock held. */
typedef struct taxi__pollfd_ops {
  /* h's place: TAXI__POLLFD_UNKNOWN, TAXI__POLLFD_SILENT, or position + 1. */
  uint32_t (*where_get)(void *ctx, taxi_handle_t h);
  /* Record h's place (TAXI__POLLFD_UNKNOWN: forget h).  0, or TAXI_ENOMEM
   * when memory ran out for a handle not yet known (nothing changed then);
   * a known handle's place is changed without allocating. */
  int (*where_set)(void *ctx, taxi_handle_t h, uint32_t where);
  /* Name h in a new entry (zeroed; its events are the table's). */
  void (*fill)(void *entry, taxi_handle_t h);
  /* The handle an entry names. */
  taxi_handle_t (*handle_of)(const void *entry);
  /* The system's poll mask for TAXI_EV_* interest. */
  short (*mask)(unsigned events);
  size_t events_offset; /* of the entry's events mask (a short) */
} taxi__pollfd_ops_t;

/* Entries and their tokens, index for index. */
typedef struct taxi__pollfd_set {
  void *fds;        /* [cap] entries of the table's entry size */
  uint64_t *tokens; /* [cap] */
  size_t count, cap;
} taxi__pollfd_set_t;

typedef struct taxi__pollfd_table {
  size_t entry_size;
  const taxi__pollfd_ops_t *ops;
  void *ctx; /* the backend's, for ops */
  taxi__mutex_t lock;

  /* Under `lock`. */
  taxi__pollfd_set_t live; /* the handles watched for something */
  uint64_t generation;     /* bumped by every change to `live` */

  /* The waiting thread's own. */
  taxi__pollfd_set_t snap;
  uint64_t snap_generation;
  size_t resume; /* where the next scan of the results starts */
} taxi__pollfd_table_t;

/* Empty table of entries `entry_size` bytes long, whose handles' places
 * `ops` keeps with `ctx`.  0 or the mutex's error; destroy only after
 * success. */
int taxi__pollfd_table_init(taxi__pollfd_table_t *t, size_t entry_size,
                            const taxi__pollfd_ops_t *ops, void *ctx);
void taxi__pollfd_table_destroy(taxi__pollfd_table_t *t);

/* Under `lock`: append an entry for `token` and return it, for the
 * backend to fill; NULL when memory ran out (nothing changed).  Its
 * position is live.count - 1.  Bumps the generation. */
void *taxi__pollfd_table_append(taxi__pollfd_table_t *t, uint64_t token);

/* Under `lock`: the live entry at `i`. */
void *taxi__pollfd_table_entry(taxi__pollfd_table_t *t, size_t i);

/* Under `lock`: remove live entry `i` by moving the last one into its
 * place.  Returns true when an entry moved (the backend then records that
 * the entry now at `i` sits there).  Bumps the generation. */
bool taxi__pollfd_table_remove_at(taxi__pollfd_table_t *t, size_t i);

/* add, modify and del of backends/readiness.h, once the backend has
 * checked h and events: take `lock`, change the set, and keep the places
 * through ops.  add: TAXI_EEXIST when h is in the set; modify and del:
 * TAXI_ENOENT when it is not; TAXI_ENOMEM.  A handle watched for nothing
 * has no entry (TAXI__POLLFD_SILENT).  modify leaves an unchanged entry
 * alone: the core re-arms handles often, and that must not cost the
 * waiter a fresh snapshot. */
int taxi__pollfd_table_add(taxi__pollfd_table_t *t, taxi_handle_t h,
                           uint64_t token, unsigned events);
int taxi__pollfd_table_modify(taxi__pollfd_table_t *t, taxi_handle_t h,
                              uint64_t token, unsigned events);
int taxi__pollfd_table_del(taxi__pollfd_table_t *t, taxi_handle_t h);

/* Waiting thread, at the start of a wait into out[0..*max): TAXI_EINVAL
 * for no room, else *max capped at what a poll call can report and the
 * snapshot brought up to date (taxi__pollfd_table_refresh). */
int taxi__pollfd_table_wait_start(taxi__pollfd_table_t *t,
                                  const taxi__ready_t *out, size_t *max);

/* Waiting thread: bring the snapshot up to date (takes `lock`).
 * Allocates only when the set has grown beyond every earlier snapshot;
 * TAXI_ENOMEM then, with the old snapshot kept. */
int taxi__pollfd_table_refresh(taxi__pollfd_table_t *t);

/* Waiting thread, after the poll call reported `nready` entries with
 * results in the snapshot: copy up to `max` of them into `out`, their
 * events translated by `events_of` (0 means nothing to report for that
 * entry).  The scan resumes where the previous one stopped when `max` cut
 * it short, so handles late in the array are not starved by busy ones
 * before them.  Returns how many were copied. */
int taxi__pollfd_table_collect(taxi__pollfd_table_t *t, int nready,
                               taxi__ready_t *out, size_t max,
                               unsigned (*events_of)(const void *entry));

#endif /* TAXI_BACKENDS_POLLFD_TABLE_H */
