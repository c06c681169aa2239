/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/options.h - reading the options structures of the public API.
 *
 * Every taxi_*_options_t begins with `size_t size`, set by its *_init
 * function and its *_OPTIONS_INIT initialiser to the size the program was
 * compiled with.  A program built against an older, shorter structure
 * passes its size and what it does not know keeps the defaults; one built
 * against a newer, longer structure may pass the fields this version does
 * not know only as zero (a non-zero one asks for something this version
 * cannot do, so it is refused, not ignored).
 */
#ifndef TAXI_CORE_OPTIONS_H
#define TAXI_CORE_OPTIONS_H

#include <stddef.h>

/* Copy the caller's options `in` (NULL: none) over `out`, which holds the
 * defaults and is `out_size` bytes long; `min_size` is the size of the
 * first published version of the structure.  Returns 0, or TAXI_EINVAL
 * (size below min_size, or a non-zero byte beyond out_size) with a detail
 * (core/common/detail.h) about `where`.size, the function and the structure as
 * the caller knows them ("taxi_lf_create: options"), which tells to call
 * `init` (the structure's initialiser, "taxi_lf_options_init").  Sets
 * out's size to out_size. */
int taxi__options_copy(void *out, size_t out_size, const void *in,
                       size_t min_size, const char *where, const char *init);

/* The checks of options that another object's create reads too: the
 * half-sync/half-async pool's, which taxi_io_create checks before the
 * pool is made (core/pools/hsha_pool.c).  Fills in the defaults of o; returns 0
 * or TAXI_EINVAL with a detail about the field `where`.<field>. */
struct taxi_hsha_options;
int taxi__hsha_options_check(struct taxi_hsha_options *o, const char *where);

#endif /* TAXI_CORE_OPTIONS_H */
