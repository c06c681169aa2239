/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_read.c - how the application reads a stream: every
 * read to a callback (read_start, read_stop), or into a buffer of its own
 * (read_into).  Each sets what the state machine's rounds deliver
 * (core/stream/stream.c), and asks for one.  Calls stream.c only.
 */
#include "config.h"

#include "core/common/detail.h"
#include "core/stream/io_impl.h"

int taxi_stream_read_start(taxi_stream_t *s, taxi_stream_read_fn fn) {
  if (!fn) return TAXI_EINVAL;
  int rc = taxi__stream_lock_open(s, "taxi_stream_read_start");
  if (rc < 0) return rc;
  if ((s->flags & TAXI__S_READ_INTO) || s->pipe_src) {
    rc = taxi__refuse(TAXI_EBUSY, "taxi_stream_read_start: s: %s",
                      s->pipe_src ? "piped (taxi_stream_pipe) into another "
                                    "stream"
                                  : "a read_into is in progress");
  } else {
    s->read_fn = fn;
    s->flags = (s->flags | TAXI__S_READING) & ~TAXI__S_EOF_TOLD;
    s->t_read = taxi_now();
    taxi__stream_request_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_read_stop(taxi_stream_t *s) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_read_stop");
  if (rc < 0) return rc;
  if ((s->flags & TAXI__S_READ_INTO) || s->pipe_src) {
    rc = taxi__refuse(TAXI_EBUSY, "taxi_stream_read_stop: s: %s",
                      s->pipe_src ? "piped (taxi_stream_pipe) into another "
                                    "stream"
                                  : "a read_into is in progress (it ends by "
                                    "completing)");
  } else if (s->flags & TAXI__S_READING) {
    s->flags &= ~TAXI__S_READING;
    taxi__stream_request_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_read_into(taxi_stream_t *s, void *buf, size_t len,
                          unsigned flags, taxi_stream_done_fn fn, void *arg) {
  if (!buf || len == 0 || !fn || (flags & ~TAXI_STREAM_READ_EXACT))
    return TAXI_EINVAL;
  int rc = taxi__stream_lock_open(s, "taxi_stream_read_into");
  if (rc < 0) return rc;
  if ((s->flags & (TAXI__S_READ_INTO | TAXI__S_READING)) || s->pipe_src) {
    rc = taxi__refuse(TAXI_EBUSY, "taxi_stream_read_into: s: %s",
                      s->pipe_src ? "piped (taxi_stream_pipe) into another "
                                    "stream"
                      : (s->flags & TAXI__S_READ_INTO)
                          ? "a read_into is in progress already"
                          : "reading (taxi_stream_read_start): stop first");
  } else {
    s->ri_buf = buf;
    s->ri_len = len;
    s->ri_done = 0;
    s->ri_flags = flags;
    s->ri_fn = fn;
    s->ri_arg = arg;
    s->flags |= TAXI__S_READ_INTO;
    s->t_read = taxi_now();
    taxi__stream_request_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}
