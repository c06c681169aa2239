/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/options.c - reading the sized options structures (see options.h).
 */
#include "config.h"

#include "core/options.h"

#include <string.h>

#include "taxi/error.h"

int taxi__options_copy(void *out, size_t out_size, const void *in,
                       size_t min_size) {
  if (!in) return 0;
  size_t in_size;
  memcpy(&in_size, in, sizeof in_size);
  /* Zero, or a structure cut short: not filled by an initialiser. */
  if (in_size < min_size) return TAXI_EINVAL;
  for (size_t i = out_size; i < in_size; i++)
    if (((const unsigned char *)in)[i]) return TAXI_EINVAL;
  memcpy(out, in, in_size < out_size ? in_size : out_size);
  memcpy(out, &out_size, sizeof out_size);
  return 0;
}
