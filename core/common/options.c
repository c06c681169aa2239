/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/options.c - reading the sized options structures (see options.h).
 */
#include "config.h"

#include "core/common/options.h"

#include <inttypes.h>
#include <string.h>

#include "core/common/detail.h"
#include "taxi/error.h"

int taxi__options_copy(void *out, size_t out_size, const void *in,
                       size_t min_size, const char *where, const char *init) {
  if (!in) return 0;
  size_t in_size;
  memcpy(&in_size, in, sizeof in_size);
  /* Zero, or a structure cut short: not filled by an initialiser. */
  if (in_size < min_size)
    return taxi__refuse(TAXI_EINVAL,
                        "%s.size: %" PRIu64
                        " is less than the structure's "
                        "%" PRIu64
                        " bytes (not set by an initialiser?), "
                        "call %s()",
                        where, (uint64_t)in_size, (uint64_t)min_size, init);
  for (size_t i = out_size; i < in_size; i++)
    if (((const unsigned char *)in)[i])
      return taxi__refuse(TAXI_EINVAL,
                          "%s.size: %" PRIu64 " bytes, and byte %" PRIu64
                          " is not zero, beyond the %" PRIu64
                          " this version "
                          "of taxi knows (built against a newer one?), call "
                          "%s()",
                          where, (uint64_t)in_size, (uint64_t)i,
                          (uint64_t)out_size, init);
  memcpy(out, in, in_size < out_size ? in_size : out_size);
  memcpy(out, &out_size, sizeof out_size);
  return 0;
}
