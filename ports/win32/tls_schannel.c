/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/tls_schannel.c - the TLS engine over SChannel, Windows' own
 * TLS, through SSPI (core/stream/tls_engine.h).  A session is an SSPI
 * context fed from memory: the ciphertext the stream read is kept in a
 * buffer and given to InitializeSecurityContext / AcceptSecurityContext
 * (the handshake) or DecryptMessage (records) as a SECBUFFER_TOKEN or
 * SECBUFFER_DATA; what they leave over (SECBUFFER_EXTRA: the start of
 * the next record) stays for the next call, and SEC_E_INCOMPLETE_MESSAGE
 * (SECBUFFER_MISSING) means "more input".  What they produce goes to an
 * output buffer the stream layer takes from.
 *
 * TLS 1.2 at least (1.3 where the system has it: the credentials are
 * asked for as SCH_CREDENTIALS with the older protocols disabled, then as
 * SCHANNEL_CRED for 1.2 and 1.3, then for 1.2 alone).
 * A client checks the server's certificate itself, once the handshake is
 * done (tls_schannel_cert.c).  Renegotiation (SEC_I_RENEGOTIATE under
 * TLS 1.2) is refused; under TLS 1.3 the same status announces a
 * post-handshake message (a session ticket, a key update), which is
 * handed back to the handshake call as SChannel asks.
 *
 * Resumption is SChannel's own: it keeps a client's sessions per
 * credentials handle and target name.  A server's SNI callback is not
 * supported (SChannel picks the certificate before any callback could
 * run): a context with one is refused.
 */
#include "config.h"

#include "core/common/alloc.h"
#include "ports/win32/tls_schannel.h"

#include <stdio.h>
#include <string.h>

typedef struct bytes {
  unsigned char *p;
  size_t len, cap;
} bytes_t;

typedef struct sess {
  sch_ctx_t *ec;
  CtxtHandle h;
  bool have_h, done, peer_closed;
  char *name;      /* a client's: the server's name, checked */
  wchar_t *target; /* a client's: the name as SNI and cache key */
  bytes_t in, out; /* ciphertext read, not yet used; to send */
  bytes_t plain;   /* decrypted, not yet read */
  size_t ppos;
  SecPkgContext_StreamSizes sizes;
} sess_t;

static const char *e_name(void) { return "SChannel (SSPI)"; }

static int grow(bytes_t *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  unsigned char *p = taxi__realloc(b->p, cap);
  if (!p) return TAXI_ENOMEM;
  b->p = p;
  b->cap = cap;
  return 0;
}

static int put(bytes_t *b, const void *data, size_t len) {
  if (len == 0) return 0;
  if (grow(b, len) < 0) return TAXI_ENOMEM;
  memcpy(b->p + b->len, data, len);
  b->len += len;
  return 0;
}

/* Keeps the last `keep` bytes of b (what SChannel left over). */
static void keep_tail(bytes_t *b, size_t keep) {
  if (keep > b->len) keep = b->len;
  memmove(b->p, b->p + b->len - keep, keep);
  b->len = keep;
}

/* "a,bc" as a SEC_APPLICATION_PROTOCOLS: a ULONG size of the lists,
 * then one list (its kind, a USHORT size, the names each prefixed by its
 * length). */
static void alpn_build(sch_ctx_t *ec, const char *list) {
  unsigned char wire[512];
  size_t n = taxi__tls_alpn_wire(list, wire, sizeof wire);
  SEC_APPLICATION_PROTOCOLS *ap = (SEC_APPLICATION_PROTOCOLS *)ec->alpn;
  SEC_APPLICATION_PROTOCOL_LIST *l = &ap->ProtocolLists[0];
  size_t head = offsetof(SEC_APPLICATION_PROTOCOL_LIST, ProtocolList);
  ap->ProtocolListsSize = (unsigned long)(head + n);
  l->ProtoNegoExt = SecApplicationProtocolNegotiationExt_ALPN;
  l->ProtocolListSize = (unsigned short)n;
  memcpy(l->ProtocolList, wire, n);
  ec->alpn_len =
      (unsigned long)(offsetof(SEC_APPLICATION_PROTOCOLS, ProtocolLists) +
                      head + n);
}

/* The credentials: SCH_CREDENTIALS (Windows 10 1809 on; the form that
 * gives TLS 1.3 there) with every protocol below TLS 1.2 disabled, else
 * SCHANNEL_CRED naming the protocols (protos; 0: try SCH_CREDENTIALS). */
static SECURITY_STATUS acquire(sch_ctx_t *ec, DWORD protos) {
  SCH_CREDENTIALS sc;
  SCHANNEL_CRED cred;
  TLS_PARAMETERS tp;
  void *auth;
  DWORD flags = 0;
  if (!ec->server)
    /* We check the server's certificate ourselves (the CA file, the
     * name), and offer no client certificate. */
    flags = SCH_CRED_MANUAL_CRED_VALIDATION | SCH_CRED_NO_DEFAULT_CREDS;
  if (protos == 0) {
    memset(&sc, 0, sizeof sc);
    memset(&tp, 0, sizeof tp);
    tp.grbitDisabledProtocols =
        SP_PROT_SSL2 | SP_PROT_SSL3 | SP_PROT_TLS1_0 | SP_PROT_TLS1_1;
    sc.dwVersion = SCH_CREDENTIALS_VERSION;
    sc.dwFlags = flags;
    sc.cTlsParameters = 1;
    sc.pTlsParameters = &tp;
    if (ec->server) {
      sc.cCreds = 1;
      sc.paCred = &ec->cert;
    }
    auth = &sc;
  } else {
    memset(&cred, 0, sizeof cred);
    cred.dwVersion = SCHANNEL_CRED_VERSION;
    cred.grbitEnabledProtocols = protos;
    cred.dwFlags = flags;
    if (ec->server) {
      cred.cCreds = 1;
      cred.paCred = &ec->cert;
    }
    auth = &cred;
  }
  return AcquireCredentialsHandleW(
      NULL, (SEC_WCHAR *)UNISP_NAME_W,
      ec->server ? SECPKG_CRED_INBOUND : SECPKG_CRED_OUTBOUND, NULL, auth, NULL,
      NULL, &ec->cred, NULL);
}

static void e_ctx_free(void *p) {
  sch_ctx_t *ec = p;
  if (!ec) return;
  if (ec->have_cred) FreeCredentialsHandle(&ec->cred);
  taxi__sch_cert_free(ec);
  taxi__free(ec);
}

static int e_ctx_new(taxi_tls_context_t *c, const taxi_tls_options_t *o,
                     char *why, size_t cap) {
  if (c->server && o->on_sni) {
    snprintf(why, cap,
             "o.on_sni: the SChannel engine chooses the certificate "
             "itself: no SNI callback");
    return TAXI_ENOTSUP;
  }
  if (!c->server && o->ca_dir) {
    snprintf(why, cap, "o.ca_dir: the SChannel engine reads ca_file only");
    return TAXI_ENOTSUP;
  }
  sch_ctx_t *ec = taxi__calloc(1, sizeof *ec);
  if (!ec) return TAXI_ENOMEM;
  ec->server = c->server;
  ec->verify = c->verify;
  int rc = 0;
  if (c->server)
    rc = taxi__sch_server_cert(ec, o->cert_file, o->key_file, why, cap);
  else if (o->ca_file)
    rc = taxi__sch_ca_load(ec, o->ca_file, why, cap);
  if (rc < 0) {
    e_ctx_free(ec);
    return rc;
  }
  if (o->alpn) alpn_build(ec, o->alpn);
  DWORD v12 = c->server ? SP_PROT_TLS1_2_SERVER : SP_PROT_TLS1_2_CLIENT;
  DWORD v13 = c->server ? SP_PROT_TLS1_3_SERVER : SP_PROT_TLS1_3_CLIENT;
  /* The newest form first; older systems (and wine) may know only
   * SCHANNEL_CRED, or not TLS 1.3. */
  SECURITY_STATUS st = acquire(ec, 0);
  if (st != SEC_E_OK) st = acquire(ec, v12 | v13);
  if (st != SEC_E_OK) st = acquire(ec, v12);
  if (st != SEC_E_OK) {
    taxi__sch_why(why, cap, "AcquireCredentialsHandle", (unsigned long)st);
    e_ctx_free(ec);
    return TAXI_ETLS;
  }
  ec->have_cred = true;
  c->ectx = ec;
  return 0;
}

static void e_session_free(void *p) {
  sess_t *ss = p;
  if (!ss) return;
  if (ss->have_h) DeleteSecurityContext(&ss->h);
  taxi__free(ss->name);
  taxi__free(ss->target);
  taxi__free(ss->in.p);
  taxi__free(ss->out.p);
  taxi__free(ss->plain.p);
  taxi__free(ss);
}

static int e_session_new(void **out, taxi_tls_context_t *c, const char *name,
                         const char *key, char *why, size_t cap) {
  (void)key; /* SChannel keeps sessions by target name itself */
  sess_t *ss = taxi__calloc(1, sizeof *ss);
  if (!ss) return TAXI_ENOMEM;
  ss->ec = c->ectx;
  SecInvalidateHandle(&ss->h);
  if (!c->server && name) {
    size_t n = strlen(name) + 1;
    ss->name = taxi__malloc(n);
    ss->target = taxi__calloc(n, sizeof *ss->target);
    if (!ss->name || !ss->target) {
      e_session_free(ss);
      return TAXI_ENOMEM;
    }
    memcpy(ss->name, name, n);
    if (MultiByteToWideChar(CP_UTF8, 0, name, -1, ss->target, (int)n) <= 0) {
      snprintf(why, cap, "the server name: not UTF-8");
      e_session_free(ss);
      return TAXI_EINVAL;
    }
  }
  *out = ss;
  return 0;
}

#define ISC_FLAGS                                                              \
  (ISC_REQ_SEQUENCE_DETECT | ISC_REQ_REPLAY_DETECT | ISC_REQ_CONFIDENTIALITY | \
   ISC_REQ_ALLOCATE_MEMORY | ISC_REQ_STREAM | ISC_REQ_EXTENDED_ERROR |         \
   ISC_REQ_MANUAL_CRED_VALIDATION)
#define ASC_FLAGS                                                              \
  (ASC_REQ_SEQUENCE_DETECT | ASC_REQ_REPLAY_DETECT | ASC_REQ_CONFIDENTIALITY | \
   ASC_REQ_ALLOCATE_MEMORY | ASC_REQ_STREAM | ASC_REQ_EXTENDED_ERROR)

/* One call of InitializeSecurityContext or AcceptSecurityContext over
 * the input kept (with the ALPN list where there is one); its output
 * appended to ss->out, the input it used dropped. */
static SECURITY_STATUS step(sess_t *ss) {
  sch_ctx_t *ec = ss->ec;
  SecBuffer ib[3], ob[2];
  unsigned long ni = 0;
  bool first = !ss->have_h;
  if (ss->in.len || ec->server) {
    ib[ni++] =
        (SecBuffer){(unsigned long)ss->in.len, SECBUFFER_TOKEN, ss->in.p};
    ib[ni++] = (SecBuffer){0, SECBUFFER_EMPTY, NULL};
  }
  /* ALPN: the client's first message carries it; a server reads it from
   * the client's hello. */
  if (ec->alpn_len && (ec->server || first))
    ib[ni++] =
        (SecBuffer){ec->alpn_len, SECBUFFER_APPLICATION_PROTOCOLS, ec->alpn};
  ob[0] = (SecBuffer){0, SECBUFFER_TOKEN, NULL};
  ob[1] = (SecBuffer){0, SECBUFFER_ALERT, NULL};
  SecBufferDesc idesc = {SECBUFFER_VERSION, ni, ib};
  SecBufferDesc odesc = {SECBUFFER_VERSION, 2, ob};
  unsigned long attrs = 0;
  SECURITY_STATUS st;
  if (ec->server)
    st = AcceptSecurityContext(&ec->cred, first ? NULL : &ss->h, &idesc,
                               ASC_FLAGS, 0, first ? &ss->h : NULL, &odesc,
                               &attrs, NULL);
  else
    st = InitializeSecurityContextW(
        &ec->cred, first ? NULL : &ss->h, ss->target, ISC_FLAGS, 0, 0,
        ni ? &idesc : NULL, 0, first ? &ss->h : NULL, &odesc, &attrs, NULL);
  /* A first call that made a context (even one that failed) must have
   * it deleted; one that wanted more input made none. */
  if (first && st != SEC_E_INCOMPLETE_MESSAGE && SecIsValidHandle(&ss->h))
    ss->have_h = true;
  for (int i = 0; i < 2; i++)
    if (ob[i].pvBuffer) {
      /* The alert of a failure goes out too: the peer learns why. */
      if (ob[i].cbBuffer && put(&ss->out, ob[i].pvBuffer, ob[i].cbBuffer) < 0)
        st = SEC_E_INSUFFICIENT_MEMORY;
      FreeContextBuffer(ob[i].pvBuffer);
    }
  if (st == SEC_E_INCOMPLETE_MESSAGE) return st; /* the input stays */
  if (ni >= 2 && ss->in.len) {
    if (ib[1].BufferType == SECBUFFER_EXTRA)
      keep_tail(&ss->in, ib[1].cbBuffer);
    else
      ss->in.len = 0;
  }
  return st;
}

static const char *proto_name(DWORD p) {
  if (p & SP_PROT_TLS1_3) return "TLSv1.3";
  if (p & SP_PROT_TLS1_2) return "TLSv1.2";
  if (p & SP_PROT_TLS1_1) return "TLSv1.1";
  if (p & SP_PROT_TLS1_0) return "TLSv1";
  return "";
}

/* The handshake is over: the sizes of records, the client's check. */
static int finished(sess_t *ss, char *why, size_t cap) {
  SECURITY_STATUS st =
      QueryContextAttributesW(&ss->h, SECPKG_ATTR_STREAM_SIZES, &ss->sizes);
  if (st != SEC_E_OK) {
    taxi__sch_why(why, cap, "QueryContextAttributes(STREAM_SIZES)",
                  (unsigned long)st);
    return TAXI_ETLS;
  }
  if (!ss->ec->server && ss->ec->verify) {
    PCCERT_CONTEXT peer = NULL;
    st =
        QueryContextAttributesW(&ss->h, SECPKG_ATTR_REMOTE_CERT_CONTEXT, &peer);
    if (st != SEC_E_OK || !peer) {
      snprintf(why, cap, "certificate verify failed: no certificate sent");
      return TAXI_EBADCERT;
    }
    int rc = taxi__sch_verify(ss->ec, peer, ss->name, why, cap);
    CertFreeCertificateContext(peer);
    if (rc < 0) return rc;
  }
  ss->done = true;
  return 0;
}

static int e_handshake(void *p, char *why, size_t cap) {
  sess_t *ss = p;
  if (ss->done) return 0;
  for (;;) {
    if (ss->have_h && ss->in.len == 0) return TAXI_EAGAIN;
    if (ss->ec->server && ss->in.len == 0) return TAXI_EAGAIN;
    SECURITY_STATUS st = step(ss);
    switch (st) {
      case SEC_E_OK:
        return finished(ss, why, cap);
      case SEC_I_CONTINUE_NEEDED:
      case SEC_I_INCOMPLETE_CREDENTIALS: /* asked for a client cert: none */
        continue;
      case SEC_E_INCOMPLETE_MESSAGE:
        return TAXI_EAGAIN;
      default:
        taxi__sch_why(why, cap,
                      ss->ec->server ? "AcceptSecurityContext"
                                     : "InitializeSecurityContext",
                      (unsigned long)st);
        return TAXI_ETLS;
    }
  }
}

/* SEC_I_RENEGOTIATE: under TLS 1.3 a post-handshake message, given to
 * the handshake call (its bytes are the input kept); else refused. */
static int renegotiate(sess_t *ss, char *why, size_t cap) {
  SecPkgContext_ConnectionInfo ci;
  memset(&ci, 0, sizeof ci);
  if (QueryContextAttributesW(&ss->h, SECPKG_ATTR_CONNECTION_INFO, &ci) !=
          SEC_E_OK ||
      !(ci.dwProtocol & SP_PROT_TLS1_3)) {
    snprintf(why, cap, "the peer asked to renegotiate (refused)");
    return TAXI_ETLS;
  }
  SECURITY_STATUS st = step(ss);
  if (st == SEC_E_OK || st == SEC_I_CONTINUE_NEEDED ||
      st == SEC_E_INCOMPLETE_MESSAGE)
    return 0;
  taxi__sch_why(why, cap, "a post-handshake message", (unsigned long)st);
  return TAXI_ETLS;
}

static int64_t e_read(void *p, void *buf, size_t cap, char *why, size_t wcap) {
  sess_t *ss = p;
  for (;;) {
    if (ss->ppos < ss->plain.len) {
      size_t n = ss->plain.len - ss->ppos;
      if (n > cap) n = cap;
      memcpy(buf, ss->plain.p + ss->ppos, n);
      ss->ppos += n;
      if (ss->ppos == ss->plain.len) ss->ppos = ss->plain.len = 0;
      return (int64_t)n;
    }
    if (ss->peer_closed) return 0;
    if (ss->in.len == 0) return TAXI_EAGAIN;
    SecBuffer b[4] = {{(unsigned long)ss->in.len, SECBUFFER_DATA, ss->in.p},
                      {0, SECBUFFER_EMPTY, NULL},
                      {0, SECBUFFER_EMPTY, NULL},
                      {0, SECBUFFER_EMPTY, NULL}};
    SecBufferDesc d = {SECBUFFER_VERSION, 4, b};
    unsigned char type = ss->in.p[0]; /* the record's content type */
    SECURITY_STATUS st = DecryptMessage(&ss->h, &d, 0, NULL);
    if (st == SEC_E_INCOMPLETE_MESSAGE) return TAXI_EAGAIN;
    if (st != SEC_E_OK && st != SEC_I_RENEGOTIATE &&
        st != SEC_I_CONTEXT_EXPIRED) {
      taxi__sch_why(why, wcap, "DecryptMessage", (unsigned long)st);
      return TAXI_ETLS;
    }
    /* Decrypted in place: copied out before the input moves. */
    size_t extra = 0, data = 0;
    for (int i = 0; i < 4; i++) {
      if (b[i].BufferType == SECBUFFER_DATA && b[i].cbBuffer &&
          put(&ss->plain, b[i].pvBuffer, b[i].cbBuffer) < 0)
        return TAXI_ENOMEM;
      if (b[i].BufferType == SECBUFFER_DATA) data = b[i].cbBuffer;
      if (b[i].BufferType == SECBUFFER_EXTRA) extra = b[i].cbBuffer;
    }
    keep_tail(&ss->in, extra);
    /* Windows tells the close_notify by SEC_I_CONTEXT_EXPIRED; wine's
     * SChannel (8.0) by SEC_E_OK and no data from an alert record (21),
     * which, as the handshake is over and any other alert fails, can only
     * be the close_notify warning. */
    if (st == SEC_E_OK && data == 0 && type == 21) st = SEC_I_CONTEXT_EXPIRED;
    if (st == SEC_I_CONTEXT_EXPIRED) {
      ss->peer_closed = true; /* the peer's close_notify */
    } else if (st == SEC_I_RENEGOTIATE) {
      int rc = renegotiate(ss, why, wcap);
      if (rc < 0) return rc;
    }
  }
}

static int e_write(void *p, const void *buf, size_t len, char *why,
                   size_t cap) {
  sess_t *ss = p;
  const SecPkgContext_StreamSizes *z = &ss->sizes;
  while (len > 0) {
    size_t n = len < z->cbMaximumMessage ? len : z->cbMaximumMessage;
    size_t whole = z->cbHeader + n + z->cbTrailer;
    if (grow(&ss->out, whole) < 0) return TAXI_ENOMEM;
    unsigned char *at = ss->out.p + ss->out.len;
    memcpy(at + z->cbHeader, buf, n);
    SecBuffer b[4] = {
        {z->cbHeader, SECBUFFER_STREAM_HEADER, at},
        {(unsigned long)n, SECBUFFER_DATA, at + z->cbHeader},
        {z->cbTrailer, SECBUFFER_STREAM_TRAILER, at + z->cbHeader + n},
        {0, SECBUFFER_EMPTY, NULL}};
    SecBufferDesc d = {SECBUFFER_VERSION, 4, b};
    SECURITY_STATUS st = EncryptMessage(&ss->h, 0, &d, 0);
    if (st != SEC_E_OK) {
      taxi__sch_why(why, cap, "EncryptMessage", (unsigned long)st);
      return TAXI_ETLS;
    }
    /* The record is header, data, trailer; a trailer may come out
     * shorter than the most it could be. */
    size_t rec = b[0].cbBuffer;
    if (b[1].pvBuffer != at + rec)
      memmove(at + rec, b[1].pvBuffer, b[1].cbBuffer);
    rec += b[1].cbBuffer;
    if (b[2].pvBuffer != at + rec)
      memmove(at + rec, b[2].pvBuffer, b[2].cbBuffer);
    rec += b[2].cbBuffer;
    ss->out.len += rec;
    buf = (const char *)buf + n;
    len -= n;
  }
  return 0;
}

static int e_feed(void *p, const void *buf, size_t len) {
  sess_t *ss = p;
  return put(&ss->in, buf, len);
}

static size_t e_take(void *p, void *buf, size_t cap) {
  sess_t *ss = p;
  size_t n = ss->out.len < cap ? ss->out.len : cap;
  if (n == 0) return 0;
  memcpy(buf, ss->out.p, n);
  memmove(ss->out.p, ss->out.p + n, ss->out.len - n);
  ss->out.len -= n;
  return n;
}

/* close_notify: SCHANNEL_SHUTDOWN applied to the context, then one more
 * handshake call, whose output is the alert. */
static int e_close_notify(void *p) {
  sess_t *ss = p;
  if (!ss->have_h) return TAXI_ETLS;
  DWORD kind = SCHANNEL_SHUTDOWN;
  SecBuffer b = {sizeof kind, SECBUFFER_TOKEN, &kind};
  SecBufferDesc d = {SECBUFFER_VERSION, 1, &b};
  if (ApplyControlToken(&ss->h, &d) != SEC_E_OK) return TAXI_ETLS;
  SecBuffer ob = {0, SECBUFFER_TOKEN, NULL};
  SecBufferDesc od = {SECBUFFER_VERSION, 1, &ob};
  unsigned long attrs = 0;
  SECURITY_STATUS st;
  if (ss->ec->server)
    st = AcceptSecurityContext(&ss->ec->cred, &ss->h, NULL, ASC_FLAGS, 0, NULL,
                               &od, &attrs, NULL);
  else
    st =
        InitializeSecurityContextW(&ss->ec->cred, &ss->h, ss->target, ISC_FLAGS,
                                   0, 0, NULL, 0, NULL, &od, &attrs, NULL);
  int rc = st == SEC_E_OK || st == SEC_I_CONTEXT_EXPIRED ? 0 : TAXI_ETLS;
  if (ob.pvBuffer) {
    if (rc == 0 && put(&ss->out, ob.pvBuffer, ob.cbBuffer) < 0) rc = TAXI_ETLS;
    FreeContextBuffer(ob.pvBuffer);
  }
  return rc;
}

static void e_info(void *p, taxi_tls_info_t *info) {
  sess_t *ss = p;
  info->handshake_done = ss->done ? 1 : 0;
  info->server = ss->ec->server ? 1 : 0;
  info->resumed = 0;
  if (ss->name)
    taxi__tls_copy_text(info->server_name, sizeof info->server_name, ss->name,
                        strlen(ss->name));
  if (!ss->done) return;
  SecPkgContext_ConnectionInfo ci;
  memset(&ci, 0, sizeof ci);
  if (QueryContextAttributesW(&ss->h, SECPKG_ATTR_CONNECTION_INFO, &ci) ==
      SEC_E_OK) {
    const char *v = proto_name(ci.dwProtocol);
    taxi__tls_copy_text(info->version, sizeof info->version, v, strlen(v));
  }
  SecPkgContext_CipherInfo cinfo;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.dwVersion = SECPKGCONTEXT_CIPHERINFO_V1;
  if (QueryContextAttributesW(&ss->h, SECPKG_ATTR_CIPHER_INFO, &cinfo) ==
      SEC_E_OK) {
    char name[64];
    int n = WideCharToMultiByte(CP_UTF8, 0, cinfo.szCipherSuite, -1, name,
                                sizeof name, NULL, NULL);
    if (n > 0)
      taxi__tls_copy_text(info->cipher, sizeof info->cipher, name,
                          strlen(name));
  }
  SecPkgContext_SessionInfo si;
  memset(&si, 0, sizeof si);
  if (QueryContextAttributesW(&ss->h, SECPKG_ATTR_SESSION_INFO, &si) ==
      SEC_E_OK)
    info->resumed = (si.dwFlags & SSL_SESSION_RECONNECT) ? 1 : 0;
  if (ss->ec->alpn_len) {
    SecPkgContext_ApplicationProtocol ap;
    memset(&ap, 0, sizeof ap);
    if (QueryContextAttributesW(&ss->h, SECPKG_ATTR_APPLICATION_PROTOCOL,
                                &ap) == SEC_E_OK &&
        ap.ProtoNegoStatus == SecApplicationProtocolNegotiationStatus_Success)
      taxi__tls_copy_text(info->alpn, sizeof info->alpn,
                          (const char *)ap.ProtocolId, ap.ProtocolIdSize);
  }
}

const taxi__tls_engine_t taxi__tls_schannel = {
    .name = e_name,
    .ctx_new = e_ctx_new,
    .ctx_free = e_ctx_free,
    .session_new = e_session_new,
    .session_free = e_session_free,
    .handshake = e_handshake,
    .read = e_read,
    .write = e_write,
    .feed = e_feed,
    .take = e_take,
    .close_notify = e_close_notify,
    .info = e_info,
};
