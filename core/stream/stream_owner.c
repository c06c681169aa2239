/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_owner.c - the refusal of a call from a thread that
 * does not own a TAXI_IO_ONE_THREAD context (core/stream/stream_lock.h),
 * out of line: it records the refusal's detail, which the inline checks
 * of every stream call should not carry.  Calls core/common only.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/io_impl.h"

int taxi__stream_refuse_foreign(const char *who) {
  return taxi__refuse(TAXI_EPERM,
                      "%s: called from a thread that does not own the "
                      "context (TAXI_IO_ONE_THREAD: only the thread that "
                      "made it runs it and calls its streams; another "
                      "reaches them with taxi_io_post)",
                      who);
}
