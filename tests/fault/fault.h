/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/fault.h - fault injection for the tests: the control calls of
 * the LD_PRELOAD module (tests/fault/fault.c) and, for test programs, a way
 * to reach them that works whether the module is loaded or not.
 */
#ifndef TAXI_TESTS_FAULT_H
#define TAXI_TESTS_FAULT_H

#include <stdbool.h>

/* ---- exported by the module (libtaxifault.so) ---------------------------- */

/* Replace the rules (see fault.c for the syntax) and zero the counters.
 * "" or NULL: no rules.  0, or -EINVAL for a bad rule list (the old rules
 * stay then). */
int taxi_fault_arm(const char *spec);
/* Calls made to `name`, and of those failed on purpose, since the last arm. */
unsigned long taxi_fault_calls(const char *name);
unsigned long taxi_fault_injected(const char *name);

/* ---- for test programs (tests/fault/client.c) -----------------------------
 */

/* Whether the module is loaded in this process. */
bool fault_available(void);
/* taxi_fault_arm() if the module is loaded; -ENOSYS otherwise. */
int fault_arm(const char *spec);
/* The counters, 0 without the module. */
unsigned long fault_calls(const char *name);
unsigned long fault_injected(const char *name);
/* Call first thing in main(): if the module is built (its path is known at
 * build time) but not loaded, run this same program again with it in
 * LD_PRELOAD.  Returns only when the module is loaded now, or cannot be (not
 * built, not Linux/glibc, already tried): the fault tests then skip and say
 * why, from fault_unavailable_reason(). */
void fault_reexec_preloaded(int argc, char **argv);
const char *fault_unavailable_reason(void);

#endif /* TAXI_TESTS_FAULT_H */
