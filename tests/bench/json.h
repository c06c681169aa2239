/* SPDX-License-Identifier: Apache-2.0 */
/*
 * json.h - what the load generators' --json output needs of JSON.
 */
#ifndef TAXI_BENCH_JSON_H
#define TAXI_BENCH_JSON_H

#include <stdio.h>

/* Write s as a JSON string, quoted, with '"', '\' and control bytes
 * escaped. */
void json_string(FILE *out, const char *s);

#endif /* TAXI_BENCH_JSON_H */
