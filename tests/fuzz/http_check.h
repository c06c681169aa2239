/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/http_check.h - the invariants of the HTTP request parser
 * (examples/jaws/http_parse.c) on any input, shared by the libFuzzer target
 * (tests/fuzz/http_parse_fuzz.c) and the CUnit program, which runs every
 * file of tests/fuzz/http_corpus/ through them, so that an input the fuzzer
 * found becomes a regular test by being copied into that directory.
 */
#ifndef TAXI_TESTS_HTTP_CHECK_H
#define TAXI_TESTS_HTTP_CHECK_H

#include <stddef.h>

/* Parses data (pipelined heads, one after the other) with the default
 * limits, small ones and ones derived from the data, fed whole, split at a
 * point derived from the data, and byte by byte.  Returns 0 when every
 * result is one of the documented ones, consistent (consumed <= input, a
 * clean path: starts with '/', no NUL, no empty, "." or ".." segment) and
 * the same for every feeding; otherwise -1 with the reason in why. */
int http_check_input(const unsigned char *data, size_t n, char *why,
                     size_t why_size);

#endif
