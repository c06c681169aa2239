/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quote.c - the quote table and the request/reply codec of quote.h.
 * Answering a request allocates nothing and takes no lock: the table is
 * read-only once loaded.
 */
#include "quote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

static int symbol_char(int c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-';
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const struct quote_entry *)a)->symbol,
                ((const struct quote_entry *)b)->symbol);
}

/* "123", "123.4", "123.45" -> cents; -1 for anything else. */
static int64_t parse_price(const char *s) {
  int64_t whole = 0, frac = 0;
  int digits = 0, fdigits = 0;
  for (; *s >= '0' && *s <= '9'; s++, digits++) {
    whole = whole * 10 + (*s - '0');
    if (whole > INT32_MAX / 100) return -1;
  }
  if (digits == 0) return -1;
  if (*s == '.') {
    for (s++; *s >= '0' && *s <= '9'; s++, fdigits++) {
      if (fdigits == 2) return -1;
      frac = frac * 10 + (*s - '0');
    }
    if (fdigits == 0) return -1;
    if (fdigits == 1) frac *= 10;
  }
  if (*s != '\0') return -1;
  if (whole * 100 + frac > INT32_MAX) return -1;
  return whole * 100 + frac;
}

static int fail(char *err, size_t size, const char *path, unsigned long line,
                const char *what) {
  if (line)
    snprintf(err, size, "%s:%lu: %s", path, line, what);
  else
    snprintf(err, size, "%s: %s", path, what);
  return -1;
}

int quote_table_load(struct quote_table *t, const char *path, char *err,
                     size_t err_size) {
  char text[256];
  unsigned long line = 0;
  size_t room = 256;
  FILE *f = fopen(path, "r");

  t->entries = NULL;
  t->count = 0;
  if (f == NULL) return fail(err, err_size, path, 0, strerror(errno));
  t->entries = malloc(room * sizeof *t->entries);
  if (t->entries == NULL) goto nomem;
  while (fgets(text, sizeof text, f)) {
    char symbol[64], price[64], extra[2];
    int64_t cents;
    size_t len;
    line++;
    if (strchr(text, '\n') == NULL && !feof(f)) {
      fail(err, err_size, path, line, "line too long");
      goto bad;
    }
    if (text[0] == '#' || text[strspn(text, " \t\r\n")] == '\0') continue;
    if (sscanf(text, "%63s %63s %1s", symbol, price, extra) != 2) {
      fail(err, err_size, path, line, "expected \"SYMBOL PRICE\"");
      goto bad;
    }
    len = strlen(symbol);
    if (len > QUOTE_SYMBOL_MAX || symbol[strspn(symbol,
                                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                "0123456789.-")] != '\0') {
      fail(err, err_size, path, line, "a symbol is 1 to 32 of A-Z 0-9 '.' '-'");
      goto bad;
    }
    if ((cents = parse_price(price)) < 0) {
      fail(err, err_size, path, line,
           "bad price (0 to 21474836.47, two decimals at most)");
      goto bad;
    }
    if (t->count == QUOTE_TABLE_MAX) {
      fail(err, err_size, path, line, "too many symbols");
      goto bad;
    }
    if (t->count == room) {
      struct quote_entry *more =
          realloc(t->entries, 2 * room * sizeof *t->entries);
      if (more == NULL) goto nomem;
      t->entries = more;
      room *= 2;
    }
    memcpy(t->entries[t->count].symbol, symbol, len + 1);
    t->entries[t->count].cents = (int32_t)cents;
    t->count++;
  }
  if (ferror(f)) {
    fail(err, err_size, path, 0, "read error");
    goto bad;
  }
  fclose(f);
  if (t->count == 0) {
    quote_table_free(t);
    return fail(err, err_size, path, 0, "no quotes in the file");
  }
  qsort(t->entries, t->count, sizeof *t->entries, entry_cmp);
  for (size_t i = 1; i < t->count; i++)
    if (strcmp(t->entries[i - 1].symbol, t->entries[i].symbol) == 0) {
      char what[80];
      snprintf(what, sizeof what, "symbol %s appears twice",
               t->entries[i].symbol);
      quote_table_free(t);
      return fail(err, err_size, path, 0, what);
    }
  return 0;

nomem:
  fail(err, err_size, path, 0, "out of memory");
bad:
  fclose(f);
  quote_table_free(t);
  return -1;
}

void quote_table_free(struct quote_table *t) {
  free(t->entries);
  t->entries = NULL;
  t->count = 0;
}

int32_t quote_lookup(const struct quote_table *t, const char *symbol,
                     size_t len) {
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *s = t->entries[mid].symbol;
    int c = strncmp(s, symbol, len);
    if (c == 0 && s[len] != '\0') c = 1; /* s is longer: it sorts after */
    if (c == 0) return t->entries[mid].cents;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

static unsigned reply(unsigned char *out, unsigned status, int32_t cents) {
  put32(out, status);
  put32(out + 4, (uint32_t)cents);
  return status;
}

unsigned quote_answer(const struct quote_table *t, const unsigned char *req,
                      unsigned char *out) {
  uint32_t len = get32(req);
  const unsigned char *sym = req + 4;
  int32_t cents;

  if (len == 0 || len > QUOTE_SYMBOL_MAX)
    return reply(out, QUOTE_MALFORMED, -1);
  for (uint32_t i = 0; i < QUOTE_SYMBOL_MAX; i++)
    if (i < len ? !symbol_char(sym[i]) : sym[i] != 0)
      return reply(out, QUOTE_MALFORMED, -1);
  cents = quote_lookup(t, (const char *)sym, len);
  if (cents < 0) return reply(out, QUOTE_UNKNOWN, -1);
  return reply(out, QUOTE_OK, cents);
}

size_t quote_answer_all(const struct quote_table *t, const unsigned char *in,
                        size_t len, unsigned char *out) {
  size_t n = len / QUOTE_REQUEST_SIZE;
  for (size_t i = 0; i < n; i++)
    quote_answer(t, in + i * QUOTE_REQUEST_SIZE, out + i * QUOTE_REPLY_SIZE);
  return n;
}

void quote_request_raw(unsigned char *req, uint32_t length, const char *bytes,
                       size_t len) {
  memset(req, 0, QUOTE_REQUEST_SIZE);
  put32(req, length);
  if (len > QUOTE_SYMBOL_MAX) len = QUOTE_SYMBOL_MAX;
  memcpy(req + 4, bytes, len);
}

void quote_request_make(unsigned char *req, const char *symbol, size_t len) {
  if (len > QUOTE_SYMBOL_MAX) len = QUOTE_SYMBOL_MAX;
  quote_request_raw(req, (uint32_t)len, symbol, len);
}
