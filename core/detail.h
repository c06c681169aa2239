/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/detail.h - recording why a call was refused (taxi_error_detail()).
 *
 * A bare TAXI_EINVAL from a create with twenty options fields leaves the
 * caller guessing; the detail names the field and the rule.  It is kept per
 * thread, so recording it takes no lock.
 */
#ifndef TAXI_CORE_DETAIL_H
#define TAXI_CORE_DETAIL_H

#if defined(__GNUC__) || defined(__clang__)
#define TAXI__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TAXI__PRINTF(f, a)
#endif

/* Record the detail (printf-style; begin with the public function's name)
 * for this thread and return `code`, so that a refusal reads
 *   return taxi__refuse(TAXI_EINVAL, "taxi_x_create: options.n: ...");  */
int taxi__refuse(int code, const char *fmt, ...) TAXI__PRINTF(2, 3);

#endif /* TAXI_CORE_DETAIL_H */
