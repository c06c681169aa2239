/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/test_jaws_policy.c - the JAWS example's adaptive policy
 * (examples/jaws/adapt_policy.c) fed made-up periods: a server whose two
 * states serve at rates the test sets, so that the decision is known.  The
 * measured policy must probe both states, take the faster only past its
 * margin, leave small-file loads in SYNC_ONLY without probing, probe again
 * after the hold and in a new regime, not restart at a bound's noise or
 * at a bursty load's swings, measure few long responses over windows
 * long enough to count them, hold a confirmed decision longer, borrow a
 * neighbouring regime's wide decision rather than probe, and
 * forget the regime when idle; the
 * threshold policy keeps its rule.
 */
#include <stdio.h>
#include <string.h>

#include "examples/jaws/adapt_policy.h"
#include "runner.h"

/* The lines the policy said, one after the other. */
static char said[8192];

static void collect(void *arg, const char *line) {
  (void)arg;
  if (strlen(said) + strlen(line) + 2 < sizeof said) {
    strcat(said, line);
    strcat(said, "\n");
  }
}

static unsigned count(const char *what) {
  unsigned n = 0;
  for (const char *p = said; (p = strstr(p, what)) != NULL; p++) n++;
  return n;
}

static void init(struct adapt_policy *p, enum adapt_kind kind) {
  said[0] = '\0';
  adapt_policy_init(p, kind, 4, 2, collect, NULL);
}

/* n periods of `conns` connections, responses of 500 kB of which
 * `large` percent of the bytes large, served at rate[state] responses
 * (half as many MB) per period. */
static int run(struct adapt_policy *p, unsigned n, unsigned conns,
               unsigned large, const double rate[2]) {
  int state = p->state;
  for (unsigned i = 0; i < n; i++) {
    struct adapt_sample s = {0};
    s.connections = conns;
    s.served = (uint64_t)rate[state];
    s.served_bytes = s.served * 500000;
    s.responses = s.served;
    s.bytes = s.served_bytes;
    s.large_bytes = s.bytes * large / 100;
    s.moves = state == ADAPT_HYBRID ? s.served : 0;
    s.ms = 100;
    state = adapt_policy_step(p, &s);
    CU_ASSERT_EQUAL(state, p->state);
  }
  return state;
}

static void test_hybrid_faster(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 110};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 10, 100, rate), ADAPT_HYBRID);
  /* Two rounds: 10% is not a clear gap. */
  CU_ASSERT_EQUAL(count("jaws: adaptive: probing connections 4-15, mean "
                        "response 100 kB-1 MB: SYNC_ONLY first"),
                  1);
  CU_ASSERT_EQUAL(count("SYNC_ONLY -> HYBRID (probing connections 4-15, "
                        "mean response 100 kB-1 MB, round 1 of 2)"),
                  1);
  CU_ASSERT_EQUAL(count("HYBRID -> SYNC_ONLY (probing connections 4-15, "
                        "mean response 100 kB-1 MB, round 2 of 2)"),
                  1);
  CU_ASSERT_EQUAL(count("SYNC_ONLY -> HYBRID (probing connections 4-15, "
                        "mean response 100 kB-1 MB, round 2 of 2)"),
                  1);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(said,
             "decided HYBRID for connections 4-15, mean response "
             "100 kB-1 MB: held SYNC_ONLY 500.0 MB/s 1000 responses/s 0 "
             "moves/s, tried HYBRID 550.0 MB/s 1100 responses/s 1100 "
             "moves/s (+10.0%, 5% needed to change)"));
}

static void test_clear_gap(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 150};
  init(&p, ADAPT_MEASURE);
  /* 4 periods to enter the regime, 4 for each state once. */
  CU_ASSERT_EQUAL(run(&p, 12, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("decided HYBRID"), 1);
  CU_ASSERT_EQUAL(count("round 2 of 2"), 0);
}

static void test_margin(void) {
  struct adapt_policy p;
  const double slower[2] = {100, 80}, barely[2] = {100, 103};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 10, 100, slower), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("decided SYNC_ONLY"), 1);
  CU_ASSERT_EQUAL(count("HYBRID -> SYNC_ONLY (decided: held SYNC_ONLY"), 1);
  /* 3% better is noise here: the incumbent stays. */
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 10, 100, barely), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("(+3.0%, 5% needed to change)"), 1);
}

static void test_small_files(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 200};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 40, 10, 1, rate), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("probing"), 0);
  CU_ASSERT_EQUAL(count("decided"), 0);
}

static void test_hold_and_reprobe(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 112}, turned[2] = {100, 60};
  init(&p, ADAPT_MEASURE);
  /* Decided after two rounds (a gap under 15%), at the 20th period. */
  CU_ASSERT_EQUAL(run(&p, 20, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("decided HYBRID"), 1);
  /* Held for the hold's length (50 periods), with no line. */
  CU_ASSERT_EQUAL(run(&p, 49, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("probing again"), 0);
  /* Then SYNC_ONLY is tried again: now it is the faster. */
  CU_ASSERT_EQUAL(run(&p, 30, 10, 100, turned), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("probing again connections 4-15, mean response "
                        "100 kB-1 MB: HYBRID first"),
                  1);
  CU_ASSERT_EQUAL(count("HYBRID -> SYNC_ONLY (probing again connections "
                        "4-15, mean response 100 kB-1 MB, round 1 of 2)"),
                  1);
  CU_ASSERT_EQUAL(count("decided SYNC_ONLY for connections 4-15"), 1);
  CU_ASSERT_EQUAL(count("tried SYNC_ONLY 500.0 MB/s"), 1);
}

static void test_new_regime(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 120}, heavy[2] = {100, 50};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(run(&p, 22, 200, 100, heavy), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("decided SYNC_ONLY for connections 64-255"), 1);
  /* Back to the first load: its decision is fresh, no probing, and no
   * regime on the way down entered. */
  CU_ASSERT_EQUAL(run(&p, 15, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("connections 16-63"), 0);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 4-15"), 1);
  CU_ASSERT_EQUAL(count("(connections 4-15, mean response 100 kB-1 MB: "
                        "decided "),
                  1);
}

/* 10 clients of 5 MB files: the open connections wander between the
 * 4-15 bucket and the one below as the clients fall behind (as measured),
 * for longer than the hysteresis absorbs.  The regime below borrows the
 * decision of 4-15, won by 140%, instead of probing SYNC_ONLY at every
 * crossing; it is probed for itself when that decision expires. */
static void test_borrowed(void) {
  struct adapt_policy p;
  const double rate[2] = {50, 120};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 12, 8, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 4-15"), 1);
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL(run(&p, 15, 2, 100, rate), ADAPT_HYBRID);
    CU_ASSERT_EQUAL(run(&p, 15, 8, 100, rate), ADAPT_HYBRID);
  }
  CU_ASSERT_EQUAL(count("adaptive: probing"), 1);
  CU_ASSERT_EQUAL(count("jaws: adaptive: connections < 4, mean response "
                        "100 kB-1 MB: HYBRID, as decided "),
                  1);
  CU_ASSERT_EQUAL(count("for connections 4-15 (HYBRID 600.0 MB/s, "
                        "SYNC_ONLY 250.0 MB/s)"),
                  1);
  /* The load stays below: the borrowed decision expires with 4-15's
   * (held 200 periods from the 12th), and the regime is probed for
   * itself (not "again": it was never measured). */
  CU_ASSERT_EQUAL(run(&p, 250, 2, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("adaptive: probing connections < 4"), 1);
  CU_ASSERT_EQUAL(count("probing again connections < 4"), 0);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections < 4"), 1);
}

/* A neighbour decided by a narrow gap lends nothing: the regime is
 * probed. */
static void test_narrow_not_borrowed(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 110};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 8, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 4-15"), 1);
  (void)run(&p, 15, 2, 100, rate);
  CU_ASSERT_EQUAL(count("as decided"), 0);
  CU_ASSERT_EQUAL(count("adaptive: probing connections < 4"), 1);
}

static void test_bound_noise(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 120};
  init(&p, ADAPT_MEASURE);
  /* 3 to 5 connections, round the bound of 4: one regime. */
  for (unsigned i = 0; i < 30; i++) run(&p, 1, i % 2 ? 3 : 5, 100, rate);
  CU_ASSERT_EQUAL(count("decided"), 1);
  CU_ASSERT_EQUAL(p.state, ADAPT_HYBRID);
}

/* 200 clients of 5 MB files that finish together and come back once they
 * have checked their bytes: the open connections swing from 0 to nearly
 * 200 every few periods (as measured).  One regime, probed and decided. */
static void test_bursty(void) {
  static const unsigned conns[] = {
      186, 78, 0,  2,   77, 158, 24, 0,   8,  137, 118, 0,  0,   27, 175, 83,
      0,   1,  83, 144, 30, 0,   10, 151, 92, 3,   1,   45, 157, 45, 0,   3};
  const double rate[2] = {50, 70}, none[2] = {0, 0};
  struct adapt_policy p;
  init(&p, ADAPT_MEASURE);
  /* Its slots last until enough responses finished (at most 30 periods
   * each): decided within 80 periods, and held (not probed again). */
  for (unsigned i = 0; i < 80; i++) {
    unsigned c = conns[i % 32];
    run(&p, 1, c, 100, c > 100 ? rate : none);
  }
  CU_ASSERT_EQUAL(count("adaptive: probing connections 64-255"), 1);
  CU_ASSERT_EQUAL(count("probing connections 16-63"), 0);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 64-255"), 1);
  CU_ASSERT_EQUAL(p.state, ADAPT_HYBRID);
}

/* Few, long responses (200 connections, 30 or 60 finished a period): a
 * slot settles until about as many responses finished as connections are
 * open (7 periods), and measures until twice as many (14): a 400 ms
 * window would have counted a fraction of one round of responses. */
static void test_long_responses(void) {
  struct adapt_policy p;
  const double rate[2] = {30, 60};
  init(&p, ADAPT_MEASURE);
  /* The regime (4 periods), then SYNC_ONLY's slot: still measuring at
   * the 24th period, where a fixed window would have moved on at the 8th. */
  CU_ASSERT_EQUAL(run(&p, 24, 200, 100, rate), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("probing connections 64-255"), 1);
  CU_ASSERT_EQUAL(count("round 1 of 2"), 0);
  CU_ASSERT_EQUAL(run(&p, 1, 200, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("SYNC_ONLY -> HYBRID (probing connections 64-255, "
                        "mean response 100 kB-1 MB, round 1 of 2)"),
                  1);
  /* HYBRID settles in 4 periods (240 >= 200), measures 7 (420 >= 400):
   * a clear gap, decided. */
  CU_ASSERT_EQUAL(run(&p, 11, 200, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 64-255"), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(said,
                                "held SYNC_ONLY 150.0 MB/s 300 "
                                "responses/s"));
}

/* A decision that a probe again confirms is held twice as long: each
 * probe costs time in the worse state. */
static void test_hold_doubles(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 112};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 20, 10, 100, rate), ADAPT_HYBRID);
  /* Held 50 periods, probed again (HYBRID first, two rounds of 4-period
   * slots), confirmed 66 periods after the first decision. */
  CU_ASSERT_EQUAL(run(&p, 70, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 1);
  CU_ASSERT_EQUAL(count("decided HYBRID for connections 4-15"), 2);
  /* Now held 100 periods from that decision (4 periods ago): no probe 60
   * after it, one begun by 110 (and under way: the state is the probe's). */
  CU_ASSERT_EQUAL(run(&p, 60, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 1);
  (void)run(&p, 50, 10, 100, rate);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 2);
}

/* A first decision by a wide gap (one that needs no second round: 15% or
 * more) is held four times as long. */
static void test_wide_gap(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 150}, lost[2] = {100, 82};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 12, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(run(&p, 150, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 0);
  CU_ASSERT_EQUAL(run(&p, 60, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 1);
  /* HYBRID 18% slower (500 kB files, as measured): SYNC_ONLY kept after
   * one round, and not probed again for as long. */
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 12, 10, 100, lost), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("decided SYNC_ONLY"), 1);
  CU_ASSERT_EQUAL(count("round 2 of 2"), 0);
  CU_ASSERT_EQUAL(run(&p, 150, 10, 100, lost), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("adaptive: probing again"), 0);
}

static void test_idle(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 120}, none[2] = {0, 0};
  init(&p, ADAPT_MEASURE);
  CU_ASSERT_EQUAL(run(&p, 25, 10, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(run(&p, 9, 0, 100, none), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(run(&p, 1, 0, 100, none), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("HYBRID -> SYNC_ONLY (idle: nothing open or served "
                        "for 10 periods)"),
                  1);
}

static void test_threshold(void) {
  struct adapt_policy p;
  const double rate[2] = {100, 100};
  init(&p, ADAPT_THRESHOLD);
  CU_ASSERT_EQUAL(run(&p, 5, 3, 100, rate), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(run(&p, 1, 4, 30, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(count("SYNC_ONLY -> HYBRID (connections 4 >= 4, large "
                        "responses 30% of bytes)"),
                  1);
  CU_ASSERT_EQUAL(run(&p, 9, 1, 100, rate), ADAPT_HYBRID);
  CU_ASSERT_EQUAL(run(&p, 1, 1, 100, rate), ADAPT_SYNC_ONLY);
  CU_ASSERT_EQUAL(count("HYBRID -> SYNC_ONLY (connections 1 < 2 for 10 "
                        "periods)"),
                  1);
}

static CU_TestInfo policy_tests[] = {
    {"HYBRID taken when it serves more", test_hybrid_faster},
    {"a clear gap decides after one round", test_clear_gap},
    {"the margin keeps the incumbent", test_margin},
    {"small files: SYNC_ONLY, no probing", test_small_files},
    {"held, then probed again", test_hold_and_reprobe},
    {"a new regime is probed, an old one remembered", test_new_regime},
    {"a neighbour's wide decision is borrowed", test_borrowed},
    {"a narrow one is not", test_narrow_not_borrowed},
    {"noise round a bound is one regime", test_bound_noise},
    {"a bursty load is one regime", test_bursty},
    {"few long responses: longer windows", test_long_responses},
    {"a confirmed decision is held longer", test_hold_doubles},
    {"a wide gap is held longer", test_wide_gap},
    {"idle: back to SYNC_ONLY", test_idle},
    {"the threshold rule", test_threshold},
    CU_TEST_INFO_NULL,
};

static const taxi_test_suite_t policy_suite = {"jaws: adaptive policy",
                                               policy_tests, 60, NULL};

int main(int argc, char **argv) {
  const taxi_test_suite_t *const suites[] = {&policy_suite};
  return taxi_test_run("jaws adaptive policy", suites, 1, argc, argv);
}
