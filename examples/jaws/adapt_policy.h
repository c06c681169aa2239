/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/adapt_policy.h - when the adaptive strategy
 * (strategy_adaptive.c) changes state: the decision alone, fed one sample
 * of the server's figures per period, with no I/O of its own, so that it
 * can be read (and tested) apart from the moving of connections.
 *
 * Two policies:
 *
 *   threshold  the first rule: HYBRID under --adapt-connections H and
 *              large responses making 20% of the bytes, back below L or
 *              5% for a second.  It assumes the Proactor wins there.
 *   measure    (the default) tries both states in each regime of the load
 *              and keeps the one that served more here: see adapt_policy.c.
 */
#ifndef ADAPT_POLICY_H
#define ADAPT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum adapt_state { ADAPT_SYNC_ONLY, ADAPT_HYBRID };
enum adapt_kind { ADAPT_MEASURE, ADAPT_THRESHOLD };

/* What one period saw. */
struct adapt_sample {
  unsigned connections; /* open at the end of the period */
  /* Responses with a body handed to the sink, their body bytes, and
   * those of large responses: the mean size, and the share that says
   * whether HYBRID has anything to move. */
  uint64_t responses, bytes, large_bytes;
  /* Responses whose last byte was written, and their body bytes: what a
   * state delivered. */
  uint64_t served, served_bytes;
  uint64_t moves; /* connections moved between the contexts */
  int64_t ms;     /* the period's real length (timers run late) */
};

/* Where lines for the log go (stderr in the server). */
typedef void (*adapt_say_fn)(void *arg, const char *line);

/* The regimes of the measured policy: open connections in powers of
 * four, the mean response in powers of ten (and whether large responses
 * make 5% of the bytes). */
#define ADAPT_CONN_BUCKETS 5
#define ADAPT_SIZE_BUCKETS 4
/* Periods over which the open connections are taken at their most. */
#define ADAPT_CONN_WINDOW 8u

/* What a state served over the slots it was probed in. */
struct adapt_acc {
  uint64_t served, bytes, moves;
  int64_t ms;
};

struct adapt_record {
  bool decided;
  bool borrowed; /* taken from a neighbouring regime, not measured here */
  int state;
  uint64_t decided_at; /* the period of the decision */
  unsigned hold;       /* periods it holds: longer each time confirmed */
  double rate[2][2];   /* [state][0: body bytes/s, 1: responses/s] */
};

struct adapt_policy {
  enum adapt_kind kind;
  unsigned high, low; /* threshold: --adapt-connections */
  adapt_say_fn say;
  void *say_arg;
  int state;
  uint64_t period; /* periods seen */
  unsigned quiet;  /* threshold: periods in a row below the low marks */
  /* measure: */
  unsigned idle; /* periods in a row with nothing served */
  /* Smoothed over periods: the responses, bytes and large bytes handed
   * to the sink (for the mean size and the share), the open connections. */
  /* Smoothed per period; peak_conns is the most connections of the last
   * ADAPT_CONN_WINDOW periods (conns_seen, measure_step). */
  double ewma_bytes, ewma_large, peak_conns, ewma_responses;
  unsigned conns_seen[ADAPT_CONN_WINDOW], conns_at;
  int regime, candidate; /* -1: none yet */
  unsigned candidate_periods;
  int phase;     /* see adapt_policy.c */
  bool again;    /* probing a regime decided before */
  int slot;      /* probing: the incumbent's when even */
  int incumbent; /* the state when the probe began */
  unsigned slot_periods;
  bool settling;           /* the slot waits for responses begun before it */
  uint64_t slot_served;    /* responses finished in this part of the slot */
  struct adapt_acc acc[2]; /* the incumbent's slots, the challenger's */
  struct adapt_record rec[ADAPT_CONN_BUCKETS][ADAPT_SIZE_BUCKETS];
};

/* A policy starting in SYNC_ONLY. */
void adapt_policy_init(struct adapt_policy *p, enum adapt_kind kind,
                       unsigned high, unsigned low, adapt_say_fn say,
                       void *say_arg);
/* One period: the state to be in from now on.  Changes and decisions are
 * said as "jaws: adaptive: ..." lines. */
int adapt_policy_step(struct adapt_policy *p, const struct adapt_sample *s);

extern const char *const adapt_state_names[2];

#endif /* ADAPT_POLICY_H */
