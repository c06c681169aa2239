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
 * Where each handle sits (descriptor-indexed on POSIX, a hash map of
 * SOCKETs on Windows) and how an entry's fields are filled are the
 * backend's.
 */
#ifndef TAXI_BACKENDS_POLLFD_TABLE_H
#define TAXI_BACKENDS_POLLFD_TABLE_H

#include "readiness.h"

#include "ports/port.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries and their tokens, index for index. */
typedef struct taxi__pollfd_set {
  void *fds;        /* [cap] entries of the table's entry size */
  uint64_t *tokens; /* [cap] */
  size_t count, cap;
} taxi__pollfd_set_t;

typedef struct taxi__pollfd_table {
  size_t entry_size;
  taxi__mutex_t lock;

  /* Under `lock`. */
  taxi__pollfd_set_t live; /* the handles watched for something */
  uint64_t generation;     /* bumped by every change to `live` */

  /* The waiting thread's own. */
  taxi__pollfd_set_t snap;
  uint64_t snap_generation;
  size_t resume; /* where the next scan of the results starts */
} taxi__pollfd_table_t;

/* Empty table of entries `entry_size` bytes long.  0 or the mutex's
 * error; destroy only after success. */
int taxi__pollfd_table_init(taxi__pollfd_table_t *t, size_t entry_size);
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
