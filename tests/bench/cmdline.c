/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmdline.c - the load generators' option parsing (cmdline.h).
 */
#include "cmdline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmdline_option(const char *prog, int argc, char **argv, int *i,
                   const char *name, const char **value) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len) != 0) return 0;
  if (argv[*i][len] == '=') {
    *value = argv[*i] + len + 1;
    ++*i;
    return 1;
  }
  if (argv[*i][len] != '\0') return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: %s needs a value\n", prog, name);
    return -1;
  }
  *value = argv[*i + 1];
  *i += 2;
  return 1;
}

int cmdline_long(const char *prog, const char *name, const char *text, long min,
                 long max, long *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "%s: %s wants a whole number from %ld to %ld, not '%s'\n",
            prog, name, min, max, text);
    return -1;
  }
  *out = v;
  return 0;
}

int cmdline_seconds(const char *prog, const char *name, const char *text,
                    double min, double *out) {
  char *end;
  double v;
  errno = 0;
  v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= min) || v > 1e6) {
    fprintf(stderr, "%s: %s wants seconds (at least %g), not '%s'\n", prog,
            name, min, text);
    return -1;
  }
  *out = v;
  return 0;
}

int cmdline_table(const char *prog, int argc, char **argv, int *i,
                  const cmdline_spec_t *specs, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const cmdline_spec_t *s = &specs[k];
    const char *v;
    long num;
    int m = cmdline_option(prog, argc, argv, i, s->name, &v);
    if (m <= 0) {
      if (m < 0) return -1;
      continue;
    }
    switch (s->kind) {
      case CMDLINE_TEXT:
        *(const char **)s->out = v;
        break;
      case CMDLINE_PORT:
        if (cmdline_long(prog, s->name, v, 1, 65535, &num) < 0) return -1;
        *(const char **)s->out = v;
        break;
      case CMDLINE_LONG:
        if (cmdline_long(prog, s->name, v, s->min, s->max, s->out) < 0)
          return -1;
        break;
      case CMDLINE_SECONDS:
        if (cmdline_seconds(prog, s->name, v, s->seconds_min, s->out) < 0)
          return -1;
        break;
    }
    if (s->given) *s->given = 1;
    return 1;
  }
  return 0;
}
