/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/mime.c - the Content-Type of a file from its extension: a
 * short table of the common static types, matched case-insensitively.
 */
#include "mime.h"

#include <ctype.h>
#include <string.h>

static const struct {
  const char *ext, *type;
} types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"txt", "text/plain; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"ico", "image/x-icon"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"gz", "application/gzip"},
    {"zip", "application/zip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"mp3", "audio/mpeg"},
    {"woff2", "font/woff2"},
};

static int same_ext(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

const char *mime_type(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  if (dot && (!slash || dot > slash))
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
      if (same_ext(dot + 1, types[i].ext)) return types[i].type;
  return "application/octet-stream";
}
