/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/stream/stream_settings.c - a stream's options, the settings that may
 * change while it runs (its data pointer, callbacks, timeouts, TCP
 * options), its references, and what it tells about itself.  None of
 * these is part of the state machine (core/stream/stream.c): each takes the
 * stream's lock for a moment, and those that change what the stream
 * waits for ask for a processing round.  Calls stream.c and io_options.c
 * only.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "core/common/detail.h"
#include "core/stream/io_impl.h"
#include "core/common/options.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#define MAX_READ_BUFFER ((size_t)16 << 20)
#define MAX_HIGH_WATERMARK ((long)256 << 20)
#define MAX_WRITES 65536u

/* ---- options --------------------------------------------------------------
 */

void taxi_stream_options_init(taxi_stream_options_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->size = sizeof *o;
  o->read_buffer = 8192;
  o->high_watermark = 32768;
  o->low_watermark = 8192;
  o->max_writes = 64;
}

#define REFUSE(...) taxi__refuse(TAXI_EINVAL, __VA_ARGS__)

int taxi__stream_options(taxi_stream_options_t *out,
                         const taxi_stream_options_t *in, const char *where) {
  taxi_stream_options_init(out);
  /* Programs built before the TLS fields pass the shorter structure. */
  if (taxi__options_copy(out, sizeof *out, in,
                         offsetof(taxi_stream_options_t, tls), where,
                         "taxi_stream_options_init") < 0)
    return TAXI_EINVAL;
  if (out->read_buffer == 0 || out->read_buffer > MAX_READ_BUFFER)
    return REFUSE("%s.read_buffer: 1 to %" PRIu64 "; got %" PRIu64, where,
                  (uint64_t)MAX_READ_BUFFER, (uint64_t)out->read_buffer);
  if (out->high_watermark < 1 || out->high_watermark > MAX_HIGH_WATERMARK)
    return REFUSE("%s.high_watermark: 1 to %ld; got %ld", where,
                  MAX_HIGH_WATERMARK, out->high_watermark);
  if (out->low_watermark < 0 || out->low_watermark >= out->high_watermark)
    return REFUSE("%s.low_watermark: 0 to high_watermark - 1 (%ld); got %ld",
                  where, out->high_watermark - 1, out->low_watermark);
  if ((out->flags & TAXI_STREAM_PAUSE_READING) &&
      (size_t)out->high_watermark <
          out->read_buffer + (size_t)out->low_watermark)
    return REFUSE(
        "%s.low_watermark: with TAXI_STREAM_PAUSE_READING at most "
        "high_watermark - read_buffer (%ld); got %ld",
        where, out->high_watermark - (long)out->read_buffer,
        out->low_watermark);
  if (out->max_writes == 0 || out->max_writes > MAX_WRITES)
    return REFUSE("%s.max_writes: 1 to %u; got %u", where, MAX_WRITES,
                  out->max_writes);
  unsigned known =
      TAXI_STREAM_PAUSE_READING | TAXI_STREAM_NODELAY | TAXI_STREAM_KEEPALIVE;
  if (out->flags & ~known)
    return REFUSE("%s.flags: unknown bits 0x%x (TAXI_STREAM_* are 0x%x)", where,
                  out->flags & ~known, known);
  const taxi_time_t *t[] = {&out->idle_timeout, &out->read_timeout,
                            &out->write_timeout, &out->connect_timeout};
  static const char *const names[] = {"idle", "read", "write", "connect"};
  for (int i = 0; i < 4; i++)
    if (taxi__io_span_check(*t[i]) < 0)
      return REFUSE("%s.%s_timeout: 0 to TAXI_TIME_SPAN_MAX ns; got %" PRId64,
                    where, names[i], (int64_t)*t[i]);
  if (out->attempt_delay != 0 &&
      (out->attempt_delay < 10 * TAXI_NSEC_PER_MSEC ||
       out->attempt_delay > 2 * TAXI_NSEC_PER_SEC))
    return REFUSE(
        "%s.attempt_delay: 0 (250 ms), or 10 ms to 2 s (RFC 8305); "
        "got %" PRId64 " ns",
        where, (int64_t)out->attempt_delay);
  if (out->tls_server_name && !out->tls)
    return REFUSE("%s.tls_server_name: set without a TLS context (tls)", where);
  return 0;
}

/* ---- settings -------------------------------------------------------------
 */

int taxi_stream_set_data(taxi_stream_t *s, void *data) {
  int rc = taxi__stream_lock_api(s, "taxi_stream_set_data");
  if (rc < 0) return rc;
  s->data = data;
  taxi__stream_unlock(s);
  return 0;
}

void *taxi_stream_data(const taxi_stream_t *s) {
  if (!s || taxi__stream_foreign(s)) return NULL;
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  taxi__stream_lock(m);
  void *d = m->data;
  taxi__stream_unlock(m);
  return d;
}

int taxi_stream_on_close(taxi_stream_t *s, taxi_stream_close_fn fn) {
  /* Still possible while closing (from the callbacks owed then, such as
   * a failed connect's), until the close callback has run. */
  int rc = taxi__stream_lock_api(s, "taxi_stream_on_close");
  if (rc < 0) return rc;
  rc = (s->flags & TAXI__S_DEAD) ? TAXI_EBADF : 0;
  if (rc == 0) s->close_fn = fn;
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_on_drain(taxi_stream_t *s, taxi_stream_drain_fn fn) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_on_drain");
  if (rc < 0) return rc;
  s->drain_fn = fn;
  taxi__stream_unlock(s);
  return 0;
}

int taxi_stream_set_timeouts(taxi_stream_t *s, taxi_time_t idle,
                             taxi_time_t read, taxi_time_t write) {
  if (taxi__io_span_check(idle) < 0 || taxi__io_span_check(read) < 0 ||
      taxi__io_span_check(write) < 0)
    return REFUSE("taxi_stream_set_timeouts: %s: 0 to TAXI_TIME_SPAN_MAX ns",
                  taxi__io_span_check(idle) < 0   ? "idle"
                  : taxi__io_span_check(read) < 0 ? "read"
                                                  : "write");
  int rc = taxi__stream_lock_open(s, "taxi_stream_set_timeouts");
  if (rc < 0) return rc;
  s->idle_to = idle;
  s->read_to = read;
  s->write_to = write;
  s->t_active = s->t_read = s->t_write = taxi_now();
  taxi__stream_request_locked(s);
  taxi__stream_unlock(s);
  return 0;
}

int taxi_stream_set_nodelay(taxi_stream_t *s, int on) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_set_nodelay");
  if (rc < 0) return rc;
  rc = taxi__sock_nodelay(s->fd, on != 0);
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_set_keepalive(taxi_stream_t *s, int on, unsigned idle_s,
                              unsigned interval_s, unsigned count) {
  int rc = taxi__stream_lock_open(s, "taxi_stream_set_keepalive");
  if (rc < 0) return rc;
  rc = taxi__sock_keepalive(s->fd, on != 0, idle_s, interval_s, count);
  taxi__stream_unlock(s);
  return rc;
}

int taxi_stream_ref(taxi_stream_t *s) {
  int rc = taxi__stream_lock_api(s, "taxi_stream_ref");
  if (rc < 0) return rc;
  s->refs++;
  taxi__stream_unlock(s);
  return 0;
}

int taxi_stream_unref(taxi_stream_t *s) {
  int rc = taxi__stream_lock_api(s, "taxi_stream_unref");
  if (rc < 0) return rc;
  if (s->refs == 0) {
    taxi__stream_unlock(s);
    return TAXI_EINVAL;
  }
  bool free_it =
      --s->refs == 0 && (s->flags & TAXI__S_DEAD) && !(s->flags & TAXI__S_BUSY);
  taxi__stream_unlock(s);
  if (free_it) {
    taxi__mutex_destroy(&s->lock);
    taxi__free(s);
  }
  return 0;
}

int taxi_stream_peer(const taxi_stream_t *s, taxi_addr_t *out) {
  if (!s || !out) return TAXI_EINVAL;
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  int rc = taxi__stream_lock_api(m, "taxi_stream_peer");
  if (rc < 0) return rc;
  rc = m->peer.family ? 0 : TAXI_ENOENT;
  if (rc == 0) *out = m->peer;
  taxi__stream_unlock(m);
  return rc;
}

int taxi_stream_local(const taxi_stream_t *s, taxi_addr_t *out) {
  if (!s || !out) return TAXI_EINVAL;
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  int rc = taxi__stream_lock_open(m, "taxi_stream_local");
  if (rc < 0) return rc;
  rc = taxi__sock_local_addr(m->fd, out);
  if (rc == 0 && out->family == 0) rc = TAXI_ENOENT;
  taxi__stream_unlock(m);
  return rc;
}

taxi_io_t *taxi_stream_io(const taxi_stream_t *s) { return s ? s->io : NULL; }

taxi_handle_t taxi_stream_handle(const taxi_stream_t *s) {
  if (!s || taxi__stream_foreign(s)) return TAXI_INVALID_HANDLE;
  /* The caller may dup(2) it: from now on the close may not be the
   * socket's end, so the stream shuts and deregisters it explicitly. */
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  taxi__stream_lock(m);
  m->own_fd = false;
  taxi__stream_unlock(m);
  return s->fd;
}

int taxi_stream_counters(const taxi_stream_t *s, taxi_stream_counters_t *out) {
  if (!s || !out)
    return taxi__refuse(TAXI_EINVAL, "taxi_stream_counters: %s: NULL",
                        !s ? "s" : "out");
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
#define GET(f) out->f = atomic_load_explicit(&m->cnt.f, memory_order_relaxed)
  GET(bytes_in);
  GET(bytes_out);
  GET(reads);
  GET(writes);
  GET(writes_refused);
  GET(writes_no_record);
  GET(read_pauses);
  GET(hook_overlaps);
#undef GET
  return 0;
}

size_t taxi_stream_write_queued(const taxi_stream_t *s) {
  if (!s || taxi__stream_foreign(s)) return 0;
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  taxi__stream_lock(m);
  size_t n = m->wused;
  taxi__stream_unlock(m);
  return n;
}

size_t taxi_stream_write_room(const taxi_stream_t *s) {
  if (!s || taxi__stream_foreign(s)) return 0;
  taxi_stream_t *m = (taxi_stream_t *)(uintptr_t)s;
  taxi__stream_lock(m);
  size_t n = 0;
  if (!(m->flags & (TAXI__S_CLOSED | TAXI__S_SHUT_REQ))) n = m->wcap - m->wused;
  taxi__stream_unlock(m);
  return n;
}

int taxi_stream_watermarks(const taxi_stream_t *s, size_t *low, size_t *high) {
  if (!s) return taxi__refuse(TAXI_EINVAL, "taxi_stream_watermarks: s: NULL");
  /* Set when the stream was made, never changed: no lock. */
  if (low) *low = s->low;
  if (high) *high = s->wcap;
  return 0;
}
