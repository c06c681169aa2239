/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/rules.c - the rules of fault injection (see rules.h): no
 * allocation and no locks that could block, since the callers wrap the
 * allocator and the waits themselves.
 */
#include "rules.h"

#include <string.h>

#ifdef _WIN32
#include <windows.h>
static uintptr_t self_id(void) { return (uintptr_t)GetCurrentThreadId(); }
#else
#include <pthread.h>
/* glibc's pthread_t is an integer (this file serves fault.c, which is
 * Linux/glibc only). */
static uintptr_t self_id(void) { return (uintptr_t)pthread_self(); }
#endif

int fault_rules_site(const fault_rules_t *set, const char *name, size_t len) {
  for (int i = 0; i < set->nsites; i++)
    if (strlen(set->sites[i]) == len && memcmp(set->sites[i], name, len) == 0)
      return i;
  return -1;
}

static int error_value(const fault_rules_t *set, const char *name, size_t len) {
  if (len == 5 && memcmp(name, "short", 5) == 0) return FAULT_WHAT_SHORT;
  for (size_t i = 0; i < set->nerrors; i++)
    if (strlen(set->errors[i].name) == len &&
        memcmp(set->errors[i].name, name, len) == 0)
      return set->errors[i].value;
  return 0;
}

static bool parse_number(const char *s, size_t len, unsigned long *out) {
  if (len == 0) return false;
  unsigned long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  *out = v;
  return true;
}

/* One rule from [s, s + len).  0 or -1. */
static int parse_rule(const fault_rules_t *set, const char *s, size_t len,
                      fault_rule_t *r) {
  const char *field[5] = {0};
  size_t flen[5] = {0};
  int nf = 0;
  const char *start = s;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == ':') {
      if (nf == 5) return -1;
      field[nf] = start;
      flen[nf] = (size_t)(s + i - start);
      nf++;
      start = s + i + 1;
    }
  }
  if (nf < 2) return -1;
  r->call = fault_rules_site(set, field[0], flen[0]);
  if (r->call < 0) return -1;
  if (!parse_number(field[1], flen[1], &r->nth) || r->nth == 0) return -1;
  r->what = set->default_what;
  if (nf >= 3 && !(r->what = error_value(set, field[2], flen[2]))) return -1;
  r->count = 1;
  if (nf >= 4 && !parse_number(field[3], flen[3], &r->count)) return -1;
  r->others = false;
  if (nf == 5) {
    if (flen[4] == 6 && memcmp(field[4], "others", 6) == 0)
      r->others = true;
    else if (!(flen[4] == 3 && memcmp(field[4], "any", 3) == 0))
      return -1;
  }
  return 0;
}

int fault_rules_arm(fault_rules_t *set, const char *spec) {
  fault_rule_t parsed[FAULT_MAX_RULES];
  int n = 0;
  if (!spec) spec = "";
  const char *s = spec;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len > 0) {
      if (n == FAULT_MAX_RULES || parse_rule(set, s, len, &parsed[n]) < 0)
        return -1;
      n++;
    }
    s += len + (end ? 1 : 0);
  }
  while (atomic_flag_test_and_set(&set->arming)) {
  }
  atomic_store(&set->nrules, 0);
  for (int i = 0; i < set->nsites; i++) {
    atomic_store(&set->calls[i], 0);
    atomic_store(&set->counted[i], 0);
    atomic_store(&set->injected[i], 0);
  }
  for (int i = 0; i < n; i++) {
    fault_rule_t *r = &set->rules[i];
    r->call = parsed[i].call;
    r->nth = parsed[i].nth;
    r->count = parsed[i].count;
    r->what = parsed[i].what;
    r->others = parsed[i].others;
    atomic_store(&r->seen, 0);
  }
  set->armer = self_id();
  atomic_store(&set->nrules, n);
  atomic_flag_clear(&set->arming);
  return 0;
}

void fault_rules_count(fault_rules_t *set, int site) {
  atomic_fetch_add_explicit(&set->calls[site], 1, memory_order_relaxed);
}

int fault_rules_decide(fault_rules_t *set, int site) {
  unsigned long n =
      atomic_fetch_add_explicit(&set->counted[site], 1, memory_order_relaxed) +
      1;
  int nr = atomic_load_explicit(&set->nrules, memory_order_acquire);
  for (int i = 0; i < nr; i++) {
    fault_rule_t *r = &set->rules[i];
    if (r->call != site) continue;
    unsigned long k = n;
    if (r->others) {
      if (self_id() == set->armer) continue;
      k = atomic_fetch_add_explicit(&r->seen, 1, memory_order_relaxed) + 1;
    }
    if (k < r->nth) continue;
    if (r->count && k >= r->nth + r->count) continue;
    atomic_fetch_add_explicit(&set->injected[site], 1, memory_order_relaxed);
    return r->what;
  }
  return 0;
}

static unsigned long counter(const fault_rules_t *set,
                             const atomic_ulong *table, const char *name) {
  int i = name ? fault_rules_site(set, name, strlen(name)) : -1;
  return i < 0 ? 0 : atomic_load((atomic_ulong *)&table[i]);
}

unsigned long fault_rules_calls(const fault_rules_t *set, const char *name) {
  return counter(set, set->calls, name);
}

unsigned long fault_rules_injected(const fault_rules_t *set, const char *name) {
  return counter(set, set->injected, name);
}
