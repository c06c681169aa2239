/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmdline.h - the load generators' option parsing (loadgen and webstone):
 * "--name value" and "--name=value", whole numbers and seconds in range.
 * Every message starts with the program's name, `prog`.
 */
#ifndef TAXI_BENCH_CMDLINE_H
#define TAXI_BENCH_CMDLINE_H

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

#endif /* TAXI_BENCH_CMDLINE_H */
