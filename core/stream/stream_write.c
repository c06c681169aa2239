/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_write.c - what the application writes to a stream:
 * bytes copied into its output ring, bytes of the caller's, a file, and the
 * shutdown of the write side once they are sent.  Each is queued under the
 * stream's lock, and the state machine's next round (core/stream/stream.c)
 * sends it: no call here waits for the socket.  But a copying write
 * without a callback into an empty queue, during a read callback, on a
 * driver whose sends return at once, is sent here, and only what the
 * socket does not take is queued (send_now_locked).  Calls stream.c only.
 */
#include "config.h"

#include "core/common/batch_clock.h"
#include "core/common/ring_index.h"
#include "core/stream/io_impl.h"

#include <string.h>

/* Flags under which a write waits for the round: the socket is not
 * connected yet, or corked (an uncork failed, and is tried again at the
 * next round's write step). */
#define WAIT_FOR_ROUND \
  (TAXI__S_CONNECTING | TAXI__S_DIALING | TAXI__S_CORKED | TAXI__S_SHUT_REQ)

/* A copying write without a callback, into an empty queue, while a read
 * callback of the stream runs (lock held): send it now, as the write step
 * of the round running the callback would, under the same lock, so that
 * nothing queued before it can be overtaken.  The common echo then costs
 * no write record, no copy into the ring, and no pass of the round's
 * write step: fewer instructions, and three cache lines a message fewer
 * (the record and the ring's first bytes of each stream), which count
 * when a thousand streams take turns.  Returns the bytes the socket took
 * (the rest is to be queued), or 0 when it took none (full, or an error:
 * then the round meets it again, and fails the stream as it does for a
 * queued write).  A write with a callback is queued as before: its
 * callback runs from a round, never inside this call.  Only during a
 * read callback, whose round sends its writes anyway: elsewhere (the
 * accept callback, on_timeout, a thread with no round under way) what is
 * written stays queued until a round, as taxi_stream_close and the room
 * (taxi_stream_write_room) count on. */
static size_t send_now_locked(taxi_stream_t *s, const void *data, size_t len) {
  taxi_buf_t b;
  b.base = (void *)(uintptr_t)data;
  b.len = len;
  int64_t n = s->io->drv->write(s, &b, 1);
  if (n <= 0) return 0;
  s->t_write = s->t_active = taxi__batch_now();
  TAXI__S_COUNT(s, bytes_out, (uint64_t)n);
  return (size_t)n;
}

/* The call that queues a write of `kind`, for a refusal's detail. */
static const char *queue_who(int kind) {
  return kind == TAXI__W_COPY  ? "taxi_stream_write"
         : kind == TAXI__W_REF ? "taxi_stream_write_ref"
                               : "taxi_stream_sendfile";
}

static int queue(taxi_stream_t *s, int kind, const void *data, size_t len,
                 taxi_handle_t file, int64_t foff, taxi_stream_done_fn fn,
                 void *arg) {
  int rc = taxi__stream_lock_open(s, queue_who(kind));
  if (rc < 0) return rc;
  if (kind == TAXI__W_COPY && !fn && s->rcount == 0 && len <= s->wcap &&
      (s->flags & (TAXI__S_IN_READ | WAIT_FOR_ROUND)) == TAXI__S_IN_READ &&
      s->io->drv->writes_anywhere && !s->tls) {
    size_t sent = send_now_locked(s, data, len);
    if (sent == len) {
      TAXI__S_COUNT(s, writes, 1);
      taxi__stream_unlock(s);
      return 0;
    }
    data = (const unsigned char *)data + sent;
    len -= sent; /* the rest is queued, below */
  }
  if (s->flags & TAXI__S_SHUT_REQ) {
    rc = TAXI_EPIPE;
  } else if (kind == TAXI__W_COPY && len > s->wcap) {
    rc = TAXI_EINVAL;
  } else if (kind == TAXI__W_COPY && len > s->wcap - s->wused) {
    rc = TAXI_EAGAIN;
  } else {
    taxi__wrec_t *tail =
        s->rcount ? &s->recs[taxi__wrap(s->rhead + s->rcount - 1, s->nrecs)]
                  : NULL;
    if (kind == TAXI__W_COPY && !fn && tail && tail->kind == TAXI__W_COPY &&
        !tail->fn) {
      tail->len += len; /* the ring is contiguous: join it */
    } else if (s->rcount == s->nrecs) {
      rc = TAXI_ENOBUFS;
    } else {
      taxi__wrec_t *r = &s->recs[taxi__wrap(s->rhead + s->rcount, s->nrecs)];
      memset(r, 0, sizeof *r);
      r->kind = kind;
      r->len = len;
      r->fn = fn;
      r->arg = arg;
      r->ptr = data;
      r->file = file;
      r->foff = foff;
      r->off = taxi__wrap(s->whead + s->wused, s->wcap);
      if (kind == TAXI__W_FILE && len <= TAXI__CORK_MAX) s->wfiles++;
      if (s->rcount++ == 0) s->t_write = taxi__batch_now();
    }
  }
  if (rc == 0 && kind == TAXI__W_COPY) {
    size_t at = taxi__wrap(s->whead + s->wused, s->wcap);
    size_t first = s->wcap - at < len ? s->wcap - at : len;
    memcpy(s->wbuf + at, data, first);
    if (first < len) /* around the end of the ring */
      memcpy(s->wbuf, (const unsigned char *)data + first, len - first);
    s->wused += len;
  }
  if (rc == TAXI_EAGAIN || rc == TAXI_ENOBUFS) {
    s->flags |= TAXI__S_NEED_DRAIN;
    TAXI__S_COUNT(s, writes_refused, 1);
    if (rc == TAXI_ENOBUFS) TAXI__S_COUNT(s, writes_no_record, 1);
  }
  if (rc == 0) {
    TAXI__S_COUNT(s, writes, 1);
    taxi__stream_wrote_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_write(taxi_stream_t *s, const void *data, size_t len,
                      taxi_stream_done_fn fn, void *arg) {
  if (!s || !data || len == 0) return TAXI_EINVAL;
  return queue(s, TAXI__W_COPY, data, len, TAXI_INVALID_HANDLE, 0, fn, arg);
}

int taxi_stream_write_ref(taxi_stream_t *s, const void *data, size_t len,
                          taxi_stream_done_fn fn, void *arg) {
  if (!s || !data || len == 0 || !fn) return TAXI_EINVAL;
  return queue(s, TAXI__W_REF, data, len, TAXI_INVALID_HANDLE, 0, fn, arg);
}

int taxi_stream_sendfile(taxi_stream_t *s, taxi_handle_t file, int64_t offset,
                         size_t len, taxi_stream_done_fn fn, void *arg) {
  int64_t size;
  if (!s || offset < 0 || len == 0) return TAXI_EINVAL;
  if (file == TAXI_INVALID_HANDLE) return TAXI_EBADF;
  int rc = taxi__file_size(file, &size);
  if (rc < 0) return rc == TAXI_EBADF ? TAXI_EBADF : TAXI_EINVAL;
  if (offset > size || (uint64_t)(size - offset) < (uint64_t)len)
    return TAXI_EINVAL;
  return queue(s, TAXI__W_FILE, NULL, len, file, offset, fn, arg);
}

int taxi_stream_shutdown(taxi_stream_t *s) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_shutdown");
  if (rc < 0) return rc;
  if (s->flags & TAXI__S_SHUT_REQ) {
    rc = TAXI_EPIPE;
  } else {
    s->flags |= TAXI__S_SHUT_REQ;
    taxi__stream_request_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_end(taxi_stream_t *s) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_end");
  if (rc < 0) return rc;
  if (s->flags & TAXI__S_END_REQ) {
    rc = TAXI_EBADF;
  } else {
    s->flags |= TAXI__S_SHUT_REQ | TAXI__S_END_REQ;
    s->flags &= ~TAXI__S_READING;
    taxi__stream_request_locked(s);
  }
  taxi__stream_unlock(s);
  return rc;
}
