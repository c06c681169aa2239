/* SPDX-License-Identifier: Apache-2.0 */
/*
 * histogram.c - the load generators' latency histogram (histogram.h).
 */
#include "histogram.h"

#include <stddef.h>

static int highest_bit(uint64_t v) { /* v > 0 */
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(v);
#else
  int b = 0;
  while (v >>= 1) b++;
  return b;
#endif
}

static size_t hist_index(uint64_t v) {
  int shift;
  if (v >= (UINT64_C(1) << HIST_MAX_BITS))
    v = (UINT64_C(1) << HIST_MAX_BITS) - 1;
  if (v < HIST_SUB_COUNT) return (size_t)v;
  shift = highest_bit(v) - (HIST_SUB_BITS - 1);
  return (size_t)shift * HIST_HALF_COUNT + (size_t)(v >> shift);
}

/* The midpoint of bucket i, the value reported for it. */
static double hist_value(size_t i) {
  size_t shift, sub;
  if (i < HIST_SUB_COUNT) return (double)i;
  shift = i / HIST_HALF_COUNT - 1;
  sub = i - shift * HIST_HALF_COUNT;
  return ((double)sub + 0.5) * (double)(UINT64_C(1) << shift);
}

void hist_record(struct histogram *h, uint64_t v) {
  h->count[hist_index(v)]++;
  h->total++;
  h->sum += v;
  if (v > h->max) h->max = v;
}

void hist_merge(struct histogram *into, const struct histogram *h) {
  size_t i;
  for (i = 0; i < HIST_BUCKETS; i++) into->count[i] += h->count[i];
  into->total += h->total;
  into->sum += h->sum;
  if (h->max > into->max) into->max = h->max;
}

double hist_quantile(const struct histogram *h, double q) {
  uint64_t want, seen = 0;
  size_t i;
  double v;
  if (h->total == 0) return 0;
  want = (uint64_t)(q * (double)h->total);
  if ((double)want < q * (double)h->total || want < 1) want++;
  for (i = 0; i < HIST_BUCKETS; i++) {
    seen += h->count[i];
    if (seen >= want) break;
  }
  if (i == HIST_BUCKETS) i--;
  v = hist_value(i);
  return v > (double)h->max ? (double)h->max : v;
}

double hist_mean(const struct histogram *h) {
  return h->total ? (double)h->sum / (double)h->total : 0.0;
}
