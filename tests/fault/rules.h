/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/rules.h - the rules of fault injection, apart from how calls
 * are intercepted: parsing a rule list (NAME:NTH[:WHAT[:COUNT[:SCOPE]]],
 * described in fault.c), counting calls and deciding which ones fail.
 *
 * Shared by the LD_PRELOAD module (fault.c, Linux) and the import-table
 * layer (iat_win32.c, Windows), so that both read one syntax the same way;
 * each brings its own table of site names and of error names.
 */
#ifndef TAXI_TESTS_FAULT_RULES_H
#define TAXI_TESTS_FAULT_RULES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAULT_MAX_RULES 16
#define FAULT_MAX_SITES 64
#define FAULT_WHAT_SHORT (-1) /* a short transfer instead of an error */

typedef struct fault_errname {
  const char *name;
  int value; /* nonzero */
} fault_errname_t;

typedef struct fault_rule {
  int call;            /* index into the site names */
  unsigned long nth;   /* first failing call, from 1 */
  unsigned long count; /* 0: for ever */
  int what;            /* error value, or FAULT_WHAT_SHORT */
  bool others;         /* SCOPE "others": the armer's calls do not count */
  atomic_ulong seen;   /* SCOPE "others": the calls that counted */
} fault_rule_t;

/* One set of rules and counters over a fixed table of sites.  Rules are
 * replaced as a whole (under `arming`); deciders read them without a lock:
 * a test arms before the calls it means to fail, so a decider racing with
 * arm sees either set, both valid (`nrules` is published last). */
typedef struct fault_rules {
  const char *const *sites; /* the site names */
  int nsites;               /* at most FAULT_MAX_SITES */
  const fault_errname_t *errors;
  size_t nerrors;
  int default_what; /* WHAT when a rule gives none */

  fault_rule_t rules[FAULT_MAX_RULES];
  atomic_int nrules;
  uintptr_t armer; /* the thread that armed the rules */
  atomic_flag arming;
  /* calls: every call since arm; counted: the calls the rules count. */
  atomic_ulong calls[FAULT_MAX_SITES];
  atomic_ulong counted[FAULT_MAX_SITES];
  atomic_ulong injected[FAULT_MAX_SITES];
} fault_rules_t;

/* The index of the site named by [name, name + len), or -1. */
int fault_rules_site(const fault_rules_t *set, const char *name, size_t len);
/* Replace the rules with those of `spec` ("" or NULL: none) and zero the
 * counters.  0, or -1 for a bad rule list (the old rules stay then). */
int fault_rules_arm(fault_rules_t *set, const char *spec);
/* Count one call of `site` without letting the rules see it. */
void fault_rules_count(fault_rules_t *set, int site);
/* Count a call of `site` the rules see; the rule's WHAT if this call must
 * fail, else 0.  (The caller counts it with fault_rules_count first.) */
int fault_rules_decide(fault_rules_t *set, int site);
/* The counters of the site called `name` (0 for an unknown name). */
unsigned long fault_rules_calls(const fault_rules_t *set, const char *name);
unsigned long fault_rules_injected(const fault_rules_t *set, const char *name);

#endif /* TAXI_TESTS_FAULT_RULES_H */
