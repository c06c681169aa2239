/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.c - JSON strings for the load generators' --json output (json.h).
 */
#include "json.h"

void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(out, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(out, "\\u%04x", (unsigned)(unsigned char)*s);
    else
      fputc(*s, out);
  }
  fputc('"', out);
}
