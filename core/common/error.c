/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/error.c - names and descriptions of the TAXI_E* codes.
 */
#include "config.h"

#include "taxi/error.h"

struct error_entry {
  int code;
  const char *name;
  const char *text;
};

static const struct error_entry errors[] = {
    {TAXI_OK, "TAXI_OK", "success"},
    {TAXI_EINVAL, "TAXI_EINVAL", "invalid argument"},
    {TAXI_ENOMEM, "TAXI_ENOMEM", "out of memory"},
    {TAXI_EBADF, "TAXI_EBADF", "invalid or closed handle"},
    {TAXI_EEXIST, "TAXI_EEXIST", "already registered"},
    {TAXI_ENOENT, "TAXI_ENOENT", "not registered"},
    {TAXI_ENOBACKEND, "TAXI_ENOBACKEND",
     "no such backend, or it does not work here"},
    {TAXI_ENOTSUP, "TAXI_ENOTSUP", "not supported by this backend"},
    {TAXI_ETOOMANY, "TAXI_ETOOMANY", "beyond the backend's handle limit"},
    {TAXI_ETIMEDOUT, "TAXI_ETIMEDOUT", "timed out"},
    {TAXI_ESTOPPED, "TAXI_ESTOPPED", "stopped"},
    {TAXI_EBUSY, "TAXI_EBUSY", "in use"},
    {TAXI_ECANCELED, "TAXI_ECANCELED", "operation canceled"},
    {TAXI_EAGAIN, "TAXI_EAGAIN", "resource temporarily unavailable"},
    {TAXI_EPERM, "TAXI_EPERM", "operation not permitted"},
    {TAXI_ESYS, "TAXI_ESYS", "operating system error"},
    {TAXI_ECONNRESET, "TAXI_ECONNRESET", "connection reset by peer"},
    {TAXI_ECONNREFUSED, "TAXI_ECONNREFUSED", "connection refused"},
    {TAXI_EPIPE, "TAXI_EPIPE", "broken pipe"},
    {TAXI_EADDRINUSE, "TAXI_EADDRINUSE", "address already in use"},
    {TAXI_EEOF, "TAXI_EEOF", "end of stream"},
    {TAXI_EBADADDR, "TAXI_EBADADDR", "malformed address (or host name)"},
    {TAXI_EMSGSIZE, "TAXI_EMSGSIZE", "message too long"},
    {TAXI_ENOBUFS, "TAXI_ENOBUFS", "out of buffers or write records"},
    {TAXI_ENONAME, "TAXI_ENONAME", "no such host name"},
    {TAXI_ETRYAGAIN, "TAXI_ETRYAGAIN", "temporary failure in name resolution"},
    {TAXI_ENOADDR, "TAXI_ENOADDR", "no address of the family asked for"},
    {TAXI_ETLS, "TAXI_ETLS", "TLS handshake or protocol failure"},
    {TAXI_ETRUNCATED, "TAXI_ETRUNCATED",
     "TLS connection ended without close_notify"},
    {TAXI_EBADCERT, "TAXI_EBADCERT", "peer certificate not accepted"},
};

static const struct error_entry *find(int code) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == code) return &errors[i];
  return NULL;
}

const char *taxi_strerror(int code) {
  const struct error_entry *e = find(code);
  return e ? e->text : "unknown error";
}

const char *taxi_error_name(int code) {
  const struct error_entry *e = find(code);
  return e ? e->name : "TAXI_E?";
}
