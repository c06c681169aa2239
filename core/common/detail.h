/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/detail.h - recording why a call was refused
 * (taxi_error_detail()).
 *
 * A bare TAXI_EINVAL from a create with twenty options fields leaves the
 * caller guessing; the detail names the field and the rule.  It is kept per
 * thread, so recording it takes no lock (it may be recorded with any lock
 * held).
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

/* How many details this thread has recorded so far.  Taken before a call
 * to another public function, it tells afterwards whether the detail now
 * recorded is that call's. */
unsigned taxi__refusals(void);

/*
 * A public function that made a call to another one (since `mark`, taken
 * with taxi__refusals()) and fails with that call's result `rc` makes the
 * callee's detail its own: a detail that begins with `inner` (say
 * "taxi_lf_create: options") has that prefix replaced by `outer` (say
 * "taxi_io_create: options.lf"), so that it names the caller's function
 * and field; any other detail the callee recorded is kept whole behind the
 * name of the outer function (the first word of `outer`), unless it begins
 * with that name already.  Nothing changes when rc is not negative or the
 * callee recorded nothing.  Returns rc.
 */
int taxi__refuse_within(int rc, unsigned mark, const char *inner,
                        const char *outer);

#endif /* TAXI_CORE_DETAIL_H */
