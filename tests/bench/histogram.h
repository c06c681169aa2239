/* SPDX-License-Identifier: Apache-2.0 */
/*
 * histogram.h - the load generators' latency histogram (loadgen and
 * webstone): log-linear, fixed size, so nothing is allocated per request.
 *
 * Values are nanoseconds.  Below 2^HIST_SUB_BITS every value has its own
 * bucket; above, each power of two [2^m, 2^(m+1)) is split into
 * HIST_HALF_COUNT equal buckets, so a bucket's width is at most 1/128 of
 * the values in it and its midpoint is within 0.4% of any of them.  Values
 * of 2^40 ns (18 minutes) and more go into the last bucket.
 *
 * Each thread fills its own and the main thread merges them at the end:
 * no function here locks.
 */
#ifndef TAXI_BENCH_HISTOGRAM_H
#define TAXI_BENCH_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB_BITS 8
#define HIST_SUB_COUNT (1 << HIST_SUB_BITS) /* 256 */
#define HIST_HALF_COUNT (HIST_SUB_COUNT / 2)
#define HIST_MAX_BITS 40
#define HIST_BUCKETS \
  ((HIST_MAX_BITS - HIST_SUB_BITS + 1) * HIST_HALF_COUNT + HIST_HALF_COUNT)

struct histogram {
  uint64_t count[HIST_BUCKETS];
  uint64_t total;
  uint64_t sum; /* of all values, for the mean */
  uint64_t max;
};

void hist_record(struct histogram *h, uint64_t v);
void hist_merge(struct histogram *into, const struct histogram *h);
/* The smallest recorded value v such that a fraction q of all values are
 * at most v (a bucket's midpoint, never above the maximum); 0 if nothing
 * was recorded. */
double hist_quantile(const struct histogram *h, double q);
double hist_mean(const struct histogram *h);

#endif /* TAXI_BENCH_HISTOGRAM_H */
