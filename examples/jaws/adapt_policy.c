/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/adapt_policy.c - the adaptive strategy's decisions (see
 * adapt_policy.h): the threshold rule, and the measured policy.
 *
 * The measured policy does not assume which model wins (the paper's NT
 * finding, the Proactor for large files under load, need not hold on
 * another kernel); it tries.  The load is cut into regimes: the open
 * connections in powers of four (under 4, 4-15, 16-63, 64-255, 256 and
 * more), the mean response in powers of ten (under 10 kB, 10-100 kB,
 * 100 kB-1 MB, 1 MB and more), and whether large responses make 5% of the
 * bytes, all smoothed over periods, so that a change of workload starts
 * afresh.  (The count is a sample at the period's end, and
 * a server ends a connection once its last bytes are in the socket's
 * buffer, so it is below the clients' count, by more the larger the
 * files: the key of a regime, not a measure of load.)  A regime is
 * entered once it has been seen STABLE_PERIODS in a row.  In a regime:
 *
 *   - with large responses under 5% of the bytes, HYBRID would move
 *     nothing: SYNC_ONLY, no probing;
 *   - otherwise each state is probed in turn, the one the server is in
 *     (the incumbent) first, PROBE_ROUNDS times (so that a change in the
 *     machine's load falls on both; a gap of CLEAR_PCT after the first
 *     round is enough): SETTLE_PERIODS for the responses begun before
 *     the change to finish, then MEASURE_PERIODS counting the body bytes
 *     and responses that were written whole.  Both parts last longer
 *     where responses are few and long (200 clients of 5 MB files, served
 *     fairly, finish together every half second or so: a short window
 *     counts a burst or none): the settling until as many responses have
 *     finished as connections are open, the measuring until twice as
 *     many, up to MAX_SETTLE_PERIODS and MAX_MEASURE_PERIODS.  The
 *     challenger wins only if it served MARGIN_PCT more body bytes per
 *     second (so noise keeps the state rather than flapping it); the
 *     winner is held HOLD_PERIODS (WIDE_HOLD_PERIODS when it won or lost
 *     by WIDE_PCT), then both are probed again, the held one first; each
 *     probe that confirms it doubles its hold, up to MAX_HOLD_PERIODS,
 *     since every probe costs time in the worse state.
 *     A regime keeps its
 * decision while it is fresh, so a workload that goes back and forth between
 * two regimes is not probed each time;
 *   - a regime with no fresh decision of its own borrows one from the
 *     regime next to it in open connections, if that one was decided by a
 *     gap of WIDE_PCT or more, until it would be probed again (then this
 *     regime is probed for itself): see wide_neighbour;
 *   - after IDLE_PERIODS with nothing served and nothing open the regime
 *     is forgotten and the server goes back to SYNC_ONLY.
 */
#include "adapt_policy.h"

#include <stdio.h>
#include <string.h>

const char *const adapt_state_names[2] = {"SYNC_ONLY", "HYBRID"};

/* The threshold rule's marks (the large share, percent of the bytes). */
#define LARGE_SHARE_ENTER 20
#define LARGE_SHARE_LEAVE (LARGE_SHARE_ENTER / 4)
#define LEAVE_PERIODS 10u

/* The measured policy's clock, in periods (100 ms in the server). */
#define STABLE_PERIODS 4u
#define SETTLE_PERIODS 1u
#define MEASURE_PERIODS 3u
#define PROBE_ROUNDS 2
#define MAX_SETTLE_PERIODS 10u
#define MAX_MEASURE_PERIODS 20u
#define HOLD_PERIODS 50u
#define MAX_HOLD_PERIODS 600u
#define WIDE_HOLD_PERIODS 200u
#define IDLE_PERIODS 10u
#define MARGIN_PCT 5
/* A gap this wide (percent, either way) after the first round decides
 * without the second: the probe's cost is time in the worse state. */
#define CLEAR_PCT 15
/* A first decision by a gap this wide (the one that needs no second
 * round) is held WIDE_HOLD_PERIODS: a drift of the machine's load is
 * unlikely to undo it, and each probe again costs a slot in the state
 * that lost by that much (with 500 kB files HYBRID lost by 10-25%). */
#define WIDE_PCT CLEAR_PCT
/* The share of the bytes (percent) large responses must make for HYBRID
 * to have anything to move. */
#define SHARE_SOME 5

enum { PH_NONE, PH_SMALL, PH_PROBE, PH_HOLD };

static const char *const conn_names[ADAPT_CONN_BUCKETS] = {
    "< 4", "4-15", "16-63", "64-255", ">= 256"};
static const char *const size_names[ADAPT_SIZE_BUCKETS] = {
    "< 10 kB", "10-100 kB", "100 kB-1 MB", ">= 1 MB"};

static void say(struct adapt_policy *p, const char *fmt_line) {
  if (p->say) p->say(p->say_arg, fmt_line);
}

/* A state change, logged with its reason. */
static void change(struct adapt_policy *p, int to, const char *why) {
  char line[400];
  if (to == p->state) return;
  snprintf(line, sizeof line, "jaws: adaptive: %s -> %s (%s)",
           adapt_state_names[p->state], adapt_state_names[to], why);
  p->state = to;
  say(p, line);
}

void adapt_policy_init(struct adapt_policy *p, enum adapt_kind kind,
                       unsigned high, unsigned low, adapt_say_fn say_fn,
                       void *say_arg) {
  *p = (struct adapt_policy){0};
  p->kind = kind;
  p->high = high;
  p->low = low;
  p->say = say_fn;
  p->say_arg = say_arg;
  p->state = ADAPT_SYNC_ONLY;
  p->regime = p->candidate = -1;
}

static int threshold_step(struct adapt_policy *p,
                          const struct adapt_sample *s) {
  unsigned share = s->bytes ? (unsigned)(s->large_bytes * 100 / s->bytes) : 0;
  char why[160];
  if (p->state == ADAPT_SYNC_ONLY && s->connections >= p->high &&
      share >= LARGE_SHARE_ENTER) {
    snprintf(why, sizeof why,
             "connections %u >= %u, large responses %u%% of bytes",
             s->connections, p->high, share);
    change(p, ADAPT_HYBRID, why);
  } else if (p->state == ADAPT_HYBRID &&
             (s->connections < p->low ||
              (s->bytes > 0 && share < LARGE_SHARE_LEAVE))) {
    /* Only after LEAVE_PERIODS in a row: clients that finish together
     * (a fair server ends equal transfers at once) leave a moment with
     * no connection between two busy ones. */
    if (++p->quiet >= LEAVE_PERIODS) {
      if (s->connections < p->low)
        snprintf(why, sizeof why, "connections %u < %u for %u periods",
                 s->connections, p->low, LEAVE_PERIODS);
      else
        snprintf(why, sizeof why, "large responses %u%% of bytes < %u%%", share,
                 LARGE_SHARE_LEAVE);
      p->quiet = 0;
      change(p, ADAPT_SYNC_ONLY, why);
    }
  } else {
    p->quiet = 0;
  }
  return p->state;
}

/* A bucket of a logarithmic scale: 0 below `first`, then one for each
 * power of `base` above it, up to n - 1. */
static int log_bucket(double x, double first, double base, int n) {
  int b = 0;
  for (double bound = first; x >= bound && b < n - 1; bound *= base) b++;
  return b;
}

static double lower_bound(int b, double first, double base) {
  double bound = first;
  while (--b > 0) bound *= base;
  return bound;
}

/* The bucket of x, with hysteresis: a neighbour of the regime's bucket
 * (cur) is taken only a quarter past the bound between them, so that a
 * load near a bound (10 clients of 5 MB files leave 3 to 5 connections
 * open) does not start a regime every few periods. */
static int held_bucket(double x, int cur, double first, double base, int n) {
  int b = log_bucket(x, first, base, n);
  if (cur < 0) return b;
  if (b == cur + 1 && x < lower_bound(b, first, base) * 1.25) return cur;
  if (b == cur - 1 && x >= lower_bound(cur, first, base) / 1.25) return cur;
  return b;
}

/* A regime as a number, and back. */
static int regime_of(int conns, int size, int some) {
  return (conns * ADAPT_SIZE_BUCKETS + size) * 2 + some;
}
#define REGIME_SOME(r) ((r) % 2)
#define REGIME_SIZE(r) ((r) / 2 % ADAPT_SIZE_BUCKETS)
#define REGIME_CONNS(r) ((r) / 2 / ADAPT_SIZE_BUCKETS)

static unsigned share_now(const struct adapt_policy *p) {
  return p->ewma_bytes > 0 ? (unsigned)(p->ewma_large * 100 / p->ewma_bytes)
                           : 0;
}

static struct adapt_record *record(struct adapt_policy *p) {
  return &p->rec[REGIME_CONNS(p->regime)][REGIME_SIZE(p->regime)];
}

static int regime_text(const struct adapt_policy *p, char *out, size_t cap) {
  return snprintf(out, cap, "connections %s, mean response %s",
                  conn_names[REGIME_CONNS(p->regime)],
                  size_names[REGIME_SIZE(p->regime)]);
}

/* A probe: the incumbent and the challenger in turn, PROBE_ROUNDS
 * times (a load on the machine that drifts meanwhile then falls on both
 * alike); slot k is the incumbent's when k is even. */
static void start_probe(struct adapt_policy *p, bool again) {
  p->phase = PH_PROBE;
  p->again = again;
  p->slot = 0;
  p->slot_periods = 0;
  p->settling = true;
  p->slot_served = 0;
  p->incumbent = p->state;
  memset(p->acc, 0, sizeof p->acc);
  if (p->say) {
    char line[300];
    int n = snprintf(line, sizeof line, "jaws: adaptive: probing%s ",
                     again ? " again" : "");
    n += regime_text(p, line + n, sizeof line - (size_t)n);
    snprintf(line + n, sizeof line - (size_t)n, ": %s first",
             adapt_state_names[p->state]);
    say(p, line);
  }
}

static void accumulate(struct adapt_policy *p, const struct adapt_sample *s) {
  struct adapt_acc *a = &p->acc[p->slot % 2];
  a->served += s->served;
  a->bytes += s->served_bytes;
  a->moves += s->moves;
  a->ms += s->ms > 0 ? s->ms : 0;
}

/* A side's figures as rates: body bytes, responses, moves per second. */
static void rates(const struct adapt_acc *a, double out[3]) {
  double sec = a->ms > 0 ? (double)a->ms / 1000 : 1;
  out[0] = (double)a->bytes / sec;
  out[1] = (double)a->served / sec;
  out[2] = (double)a->moves / sec;
}

/* The next slot of the probe, in its state. */
static void next_slot(struct adapt_policy *p) {
  char why[300];
  int n, to;
  p->slot++;
  p->slot_periods = 0;
  p->settling = true;
  p->slot_served = 0;
  to = p->slot % 2 ? !p->incumbent : p->incumbent;
  n = snprintf(why, sizeof why, "probing%s ", p->again ? " again" : "");
  n += regime_text(p, why + n, sizeof why - (size_t)n);
  snprintf(why + n, sizeof why - (size_t)n, ", round %d of %d", p->slot / 2 + 1,
           PROBE_ROUNDS);
  change(p, to, why);
}

static void hold(struct adapt_policy *p) { p->phase = PH_HOLD; }

/* The challenger's gain on the incumbent so far, percent. */
static double gain_pct(const struct adapt_policy *p) {
  double a[3], b[3];
  rates(&p->acc[0], a);
  rates(&p->acc[1], b);
  return a[0] > 0 ? (b[0] / a[0] - 1) * 100 : (b[0] > 0 ? 100 : 0);
}

static bool clear_gap(const struct adapt_policy *p) {
  double g = gain_pct(p);
  return g >= CLEAR_PCT || g <= -CLEAR_PCT;
}

/* Every slot measured: keep the incumbent unless the challenger served
 * MARGIN_PCT more body bytes per second. */
static void decide(struct adapt_policy *p) {
  struct adapt_record *r = record(p);
  int inc = p->incumbent, ch = !inc;
  double a[3], b[3];
  rates(&p->acc[0], a);
  rates(&p->acc[1], b);
  double gain = gain_pct(p);
  int winner = gain >= MARGIN_PCT ? ch : inc;
  char regime[120], line[600], why[400];
  regime_text(p, regime, sizeof regime);
  snprintf(line, sizeof line,
           "jaws: adaptive: decided %s for %s: held %s %.1f MB/s %.0f "
           "responses/s %.0f moves/s, tried %s %.1f MB/s %.0f responses/s "
           "%.0f moves/s (%+.1f%%, %d%% needed to change)",
           adapt_state_names[winner], regime, adapt_state_names[inc],
           a[0] / 1e6, a[1], a[2], adapt_state_names[ch], b[0] / 1e6, b[1],
           b[2], gain, MARGIN_PCT);
  say(p, line);
  /* A probe again that keeps the held state confirms it: hold longer.  A
   * first decision by a wide gap starts longer: a drift of the machine's
   * load is unlikely to undo it, and its probe costs the most. */
  if (p->again && r->decided && !r->borrowed && r->state == winner &&
      winner == inc)
    r->hold = r->hold * 2 < MAX_HOLD_PERIODS ? r->hold * 2 : MAX_HOLD_PERIODS;
  else
    r->hold = gain >= WIDE_PCT || gain <= -WIDE_PCT ? WIDE_HOLD_PERIODS
                                                    : HOLD_PERIODS;
  r->decided = true;
  r->borrowed = false;
  r->state = winner;
  r->decided_at = p->period;
  for (int i = 0; i < 2; i++) {
    r->rate[inc][i] = a[i];
    r->rate[ch][i] = b[i];
  }
  snprintf(why, sizeof why,
           "decided: held %s %.1f MB/s, tried %s %.1f MB/s, %+.1f%% < %d%%",
           adapt_state_names[inc], a[0] / 1e6, adapt_state_names[ch],
           b[0] / 1e6, gain, MARGIN_PCT);
  change(p, winner, why);
  hold(p);
}

/* A decision's rates, the winner's first: "HYBRID 1727.6 MB/s, SYNC_ONLY
 * 819.4 MB/s". */
static void record_rates(const struct adapt_record *r, char *out, size_t cap) {
  snprintf(out, cap, "%s %.1f MB/s, %s %.1f MB/s", adapt_state_names[r->state],
           r->rate[r->state][0] / 1e6, adapt_state_names[!r->state],
           r->rate[!r->state][0] / 1e6);
}

static bool fresh(const struct adapt_policy *p, const struct adapt_record *r) {
  return r->decided && p->period - r->decided_at < r->hold;
}

/* A decision measured in the regime next to r in open connections (the
 * same mean response), still fresh, whose winner served WIDE_PCT more
 * than the loser.  Where the clients and not the server set
 * the pace, the open connections wander across a bound (10 clients of 5
 * MB files leave 2 to 6 open, depending on how far behind the clients
 * are): probing the regime on the other side would cost a slot in a state
 * that lost by 50-130% next door, each time the load crosses over, and
 * such a slot is often cut short by the next crossing, so the probe never
 * ends.  Its bucket of connections, or -1. */
static int wide_neighbour(const struct adapt_policy *p, int r) {
  int size = REGIME_SIZE(r);
  for (int c = REGIME_CONNS(r) - 1; c <= REGIME_CONNS(r) + 1; c += 2) {
    const struct adapt_record *n;
    double won, lost;
    if (c < 0 || c >= ADAPT_CONN_BUCKETS) continue;
    n = &p->rec[c][size];
    if (!fresh(p, n) || n->borrowed) continue;
    won = n->rate[n->state][0];
    lost = n->rate[!n->state][0];
    if (won > 0 && won >= lost * (1 + WIDE_PCT / 100.0)) return c;
  }
  return -1;
}

/* The load has been in regime r for STABLE_PERIODS. */
static void enter(struct adapt_policy *p, int r) {
  struct adapt_record *rec;
  int near;
  char why[300], rates[100];
  p->regime = r;
  p->candidate = -1;
  p->candidate_periods = 0;
  rec = record(p);
  if (!REGIME_SOME(r)) {
    p->phase = PH_SMALL;
    snprintf(why, sizeof why,
             "large responses %u%% of bytes < %d%%: nothing to move",
             share_now(p), SHARE_SOME);
    change(p, ADAPT_SYNC_ONLY, why);
  } else if (fresh(p, rec)) {
    int n = regime_text(p, why, sizeof why);
    record_rates(rec, rates, sizeof rates);
    snprintf(why + n, sizeof why - (size_t)n, ": %s %llu ms ago, %s",
             rec->borrowed ? "borrowed" : "decided",
             (unsigned long long)(p->period - rec->decided_at) * 100, rates);
    change(p, rec->state, why);
    hold(p);
  } else if ((near = wide_neighbour(p, r)) >= 0) {
    /* Taken with its age: it is probed here when the neighbour's would
     * be, and measured here then. */
    char line[400];
    int n = snprintf(line, sizeof line, "jaws: adaptive: ");
    *rec = p->rec[near][REGIME_SIZE(r)];
    rec->borrowed = true;
    n += regime_text(p, line + n, sizeof line - (size_t)n);
    record_rates(rec, rates, sizeof rates);
    snprintf(line + n, sizeof line - (size_t)n,
             ": %s, as decided %llu ms ago for connections %s (%s)",
             adapt_state_names[rec->state],
             (unsigned long long)(p->period - rec->decided_at) * 100,
             conn_names[near], rates);
    say(p, line);
    change(p, rec->state, "borrowed from the neighbouring regime");
    hold(p);
  } else {
    start_probe(p, false);
  }
}

static int measure_step(struct adapt_policy *p, const struct adapt_sample *s) {
  int cand;
  /* The share, smoothed: a period holds few large responses. */
  p->ewma_bytes += ((double)s->bytes - p->ewma_bytes) / 4;
  p->ewma_large += ((double)s->large_bytes - p->ewma_large) / 4;
  p->ewma_responses += ((double)s->responses - p->ewma_responses) / 4;
  /* The connections as the most seen in the last ADAPT_CONN_WINDOW
   * periods: a load that grows crosses to its bucket at once, one that
   * falls does when the window has passed, without entering the buckets
   * between, and a bursty one (200 clients of 5 MB files that all finish
   * together and leave nothing open until they have checked their bytes
   * and come back) keeps the bucket of its bursts instead of crossing two
   * buckets every period. */
  p->conns_seen[p->conns_at++ % ADAPT_CONN_WINDOW] = s->connections;
  p->peak_conns = 0;
  for (unsigned i = 0; i < ADAPT_CONN_WINDOW; i++)
    if (p->conns_seen[i] > p->peak_conns) p->peak_conns = p->conns_seen[i];
  if (s->connections == 0 && s->served == 0 && s->bytes == 0) {
    /* Nothing to measure: an idle period is no one's figure. */
    if (++p->idle >= IDLE_PERIODS && p->phase != PH_NONE) {
      char why[80];
      snprintf(why, sizeof why, "idle: nothing open or served for %u periods",
               IDLE_PERIODS);
      p->phase = PH_NONE;
      p->regime = p->candidate = -1;
      p->ewma_bytes = p->ewma_large = p->peak_conns = p->ewma_responses = 0;
      memset(p->conns_seen, 0, sizeof p->conns_seen);
      if (p->state == ADAPT_SYNC_ONLY) {
        char line[160];
        snprintf(line, sizeof line, "jaws: adaptive: %s, regime forgotten",
                 why);
        say(p, line);
      }
      change(p, ADAPT_SYNC_ONLY, why);
    }
    return p->state;
  }
  p->idle = 0;
  cand = regime_of(
      held_bucket(p->peak_conns, p->regime < 0 ? -1 : REGIME_CONNS(p->regime),
                  4, 4, ADAPT_CONN_BUCKETS),
      held_bucket(p->ewma_responses > 0 ? p->ewma_bytes / p->ewma_responses : 0,
                  p->regime < 0 ? -1 : REGIME_SIZE(p->regime), 10000, 10,
                  ADAPT_SIZE_BUCKETS),
      share_now(p) >= SHARE_SOME);
  if (cand == p->regime) {
    p->candidate = -1;
    p->candidate_periods = 0;
  } else {
    if (cand != p->candidate) {
      p->candidate = cand;
      p->candidate_periods = 0;
    }
    if (++p->candidate_periods >= STABLE_PERIODS) {
      enter(p, cand);
      return p->state; /* this period belongs to the regime before */
    }
  }
  switch (p->phase) {
    case PH_PROBE:
      p->slot_periods++;
      p->slot_served += s->served;
      if (p->settling) {
        if (p->slot_periods < SETTLE_PERIODS ||
            (p->slot_served < p->peak_conns &&
             p->slot_periods < MAX_SETTLE_PERIODS))
          break;
        p->settling = false; /* measured from the next period on */
        p->slot_periods = 0;
        p->slot_served = 0;
        break;
      }
      accumulate(p, s);
      if (p->slot_periods < MEASURE_PERIODS ||
          (p->slot_served < 2 * p->peak_conns &&
           p->slot_periods < MAX_MEASURE_PERIODS))
        break;
      if (p->slot + 1 < 2 * PROBE_ROUNDS && !(p->slot == 1 && clear_gap(p)))
        next_slot(p);
      else
        decide(p);
      break;
    case PH_HOLD:
      if (!fresh(p, record(p))) start_probe(p, !record(p)->borrowed);
      break;
    default:
      break;
  }
  return p->state;
}

int adapt_policy_step(struct adapt_policy *p, const struct adapt_sample *s) {
  p->period++;
  return p->kind == ADAPT_THRESHOLD ? threshold_step(p, s) : measure_step(p, s);
}
