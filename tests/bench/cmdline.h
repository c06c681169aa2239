/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmdline.h - the load generators' option parsing (loadgen and webstone):
 * "--name value" and "--name=value", whole numbers and seconds in range.
 * Every message starts with the program's name, `prog`.
 */
#ifndef TAXI_BENCH_CMDLINE_H
#define TAXI_BENCH_CMDLINE_H

#include <stddef.h>

/* Returns 1 and sets *value (advancing *i past it) if argv[*i] is option
 * `name`, 0 if it is not, -1 (after a message) if its value is missing. */
int cmdline_option(const char *prog, int argc, char **argv, int *i,
                   const char *name, const char **value);

/* A whole number in [min, max] into *out: 0, or -1 after a message. */
int cmdline_long(const char *prog, const char *name, const char *text, long min,
                 long max, long *out);

/* Seconds, at least min and at most a million, into *out: 0, or -1 after a
 * message. */
int cmdline_seconds(const char *prog, const char *name, const char *text,
                    double min, double *out);

/* What an option of a table takes (cmdline_table). */
typedef enum cmdline_kind {
  CMDLINE_TEXT,    /* any text: out is a const char ** */
  CMDLINE_PORT,    /* a TCP port, 1 to 65535, kept as its text: const char ** */
  CMDLINE_LONG,    /* a whole number in [min, max]: long * */
  CMDLINE_SECONDS, /* seconds, at least seconds_min (cmdline_seconds): double *
                    */
} cmdline_kind_t;

/* One option of a program's table. */
typedef struct cmdline_spec {
  const char *name; /* "--port" */
  cmdline_kind_t kind;
  void *out; /* where the value goes, of the kind's type */
  long min, max;
  double seconds_min;
  int *given; /* set to 1 when the option is seen; NULL: not wanted */
} cmdline_spec_t;

/* If argv[*i] is one of the n options of specs, its value is checked and
 * stored (and *i advanced past it): 1.  0 if it is none of them; -1 after
 * a message if its value is missing or out of range. */
int cmdline_table(const char *prog, int argc, char **argv, int *i,
                  const cmdline_spec_t *specs, size_t n);

#endif /* TAXI_BENCH_CMDLINE_H */
