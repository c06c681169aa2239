/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/tls_schannel.h - private to the SChannel TLS engine: the
 * engine's context, shared by its two files (tls_schannel.c, the
 * sessions; tls_schannel_cert.c, the certificates, the server's key and
 * the client's verification).
 */
#ifndef TAXI_PORTS_WIN32_TLS_SCHANNEL_H
#define TAXI_PORTS_WIN32_TLS_SCHANNEL_H

#define SECURITY_WIN32 1
#include "ports/win32/win32_impl.h"

/* SCH_CREDENTIALS and TLS_PARAMETERS (which name UNICODE_STRING). */
#define SCHANNEL_USE_BLACKLISTS 1
#include <subauth.h>

#include <schannel.h>
#include <security.h>
#include <sspi.h>
#include <wincrypt.h>

#include "core/stream/tls_engine.h"

typedef struct sch_ctx {
  CredHandle cred;
  bool have_cred;
  bool server, verify;
  /* A client: the authorities of ca_file (NULL: the system's store). */
  HCERTSTORE ca;
  /* A server: its certificate (in a memory store holding the chain) and
   * the CryptoAPI key container its key was imported into. */
  PCCERT_CONTEXT cert;
  HCERTSTORE chain;
  wchar_t container[64];
  bool have_container;
  /* Or (an EC key) the CNG key of that name, deleted with the context. */
  ULONG_PTR cng_prov, cng_key;
  /* ALPN as SChannel takes it: a SEC_APPLICATION_PROTOCOLS. */
  unsigned char alpn[600];
  unsigned long alpn_len;
} sch_ctx_t;

/* The words of a SECURITY_STATUS or a GetLastError code: "what: the
 * system's message (0x...)". */
void taxi__sch_why(char *why, size_t cap, const char *what, unsigned long st);

/* A server's certificate chain (PEM) and key (PEM: PKCS#8 or PKCS#1 RSA)
 * into ec->cert, ec->chain and ec->container: 0, or TAXI_ENOENT,
 * TAXI_ETLS, TAXI_ENOMEM with why. */
int taxi__sch_server_cert(sch_ctx_t *ec, const char *cert_file,
                          const char *key_file, char *why, size_t cap);
/* The certificates of a PEM file into ec->ca: 0, or TAXI_ENOENT,
 * TAXI_ETLS, TAXI_ENOMEM with why. */
int taxi__sch_ca_load(sch_ctx_t *ec, const char *ca_file, char *why,
                      size_t cap);
/* Frees what the two above made (the key container removed). */
void taxi__sch_cert_free(sch_ctx_t *ec);
/* The server's certificate checked by a client: its chain to ec->ca (or
 * the system's roots), its dates, and name (a host name or an IP
 * address; NULL: the name is not checked).  0 or TAXI_EBADCERT with why
 * in OpenSSL's words where they exist ("certificate has expired"). */
int taxi__sch_verify(const sch_ctx_t *ec, PCCERT_CONTEXT peer, const char *name,
                     char *why, size_t cap);

#endif /* TAXI_PORTS_WIN32_TLS_SCHANNEL_H */
