/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ports/win32/tls_schannel_cert.c - the certificates of the SChannel TLS
 * engine: PEM files decoded with CryptStringToBinaryA, a server's key
 * imported into a CryptoAPI key container bound to its certificate, and
 * a client's check of the server's certificate (SChannel is told to leave
 * that to us: SCH_CRED_MANUAL_CRED_VALIDATION).
 *
 * The server's key.  SChannel finds a certificate's private key through
 * its CERT_KEY_PROV_INFO_PROP_ID: a named container of a provider.  The
 * key is imported into a container of its own (named after the process
 * and a counter, removed with the context) of the RSA/AES CryptoAPI
 * provider, exportable, because wine's SChannel reads the key back out
 * of the container (CryptExportKey) to hand it to GnuTLS and takes RSA
 * keys only.  An EC key goes to a named, persisted CNG key of the
 * software key storage provider (NCryptImportKey of the PKCS#8 blob),
 * which Windows' SChannel uses; ncrypt.dll is loaded at run time, so a
 * system without it (or whose CNG cannot import the key, as wine 8's)
 * refuses EC keys with the reason and keeps everything else.
 *
 * The client's check.  The chain is built by CertGetCertificateChain
 * over the certificates the server sent plus ca_file's; with a ca_file,
 * the chain's root must be one of its certificates (an exclusive root:
 * the system's roots are not trusted then, as with OpenSSL's
 * load_verify_locations), and the "untrusted root" status that the
 * system gives a root it does not know is set aside.  The name is then
 * checked by CertVerifyCertificateChainPolicy(CERT_CHAIN_POLICY_SSL), an
 * IP address against the certificate's IP address names here (not every
 * Windows nor wine matches those).
 */
#include "config.h"

#include "core/common/alloc.h"
#include "ports/win32/tls_schannel.h"

#include <ncrypt.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define FILE_MAX (1u << 20)

/* SSL_EXTRA_CERT_CHAIN_POLICY_PARA.fdwChecks, from wininet.h (not
 * included for four constants). */
#ifndef SECURITY_FLAG_IGNORE_REVOCATION
#define SECURITY_FLAG_IGNORE_REVOCATION 0x00000080
#define SECURITY_FLAG_IGNORE_UNKNOWN_CA 0x00000100
#define SECURITY_FLAG_IGNORE_WRONG_USAGE 0x00000200
#define SECURITY_FLAG_IGNORE_CERT_CN_INVALID 0x00001000
#endif

void taxi__sch_why(char *why, size_t cap, const char *what, unsigned long st) {
  char msg[200] = "";
  DWORD n =
      FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                     NULL, (DWORD)st, 0, msg, sizeof msg, NULL);
  /* The system's messages end in ".\r\n". */
  while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r' ||
                   msg[n - 1] == '.' || msg[n - 1] == ' '))
    msg[--n] = '\0';
  if (n > 0)
    snprintf(why, cap, "%s: %s (0x%08lx)", what, msg, st);
  else
    snprintf(why, cap, "%s: error 0x%08lx", what, st);
}

/* The whole file into *out (NUL-terminated, freed by the caller). */
static int read_file(const char *path, char **out, size_t *len, char *why,
                     size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, cap, "cannot read %s", path);
    return TAXI_ENOENT;
  }
  char *buf = taxi__malloc(FILE_MAX + 1);
  if (!buf) {
    fclose(f);
    return TAXI_ENOMEM;
  }
  size_t n = fread(buf, 1, FILE_MAX + 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad || n > FILE_MAX) {
    taxi__free(buf);
    snprintf(why, cap, "%s: %s", path,
             bad ? "read error" : "larger than 1 MiB");
    return bad ? TAXI_ENOENT : TAXI_ETLS;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

/* The next PEM block at or after *at: its label (into label) and its DER
 * bytes (allocated, freed by the caller); *at moves past it.  1, 0 (no
 * more blocks), or -1 (a block that does not decode). */
static int pem_next(const char **at, char *label, size_t lcap,
                    unsigned char **der, DWORD *dlen) {
  const char *b = strstr(*at, "-----BEGIN ");
  if (!b) return 0;
  const char *l = b + 11, *le = strstr(l, "-----");
  if (!le) return -1;
  size_t ln = (size_t)(le - l);
  if (ln >= lcap) ln = lcap - 1;
  memcpy(label, l, ln);
  label[ln] = '\0';
  const char *e = strstr(le + 5, "-----END ");
  const char *ee = e ? strstr(e + 9, "-----") : NULL;
  if (!ee) return -1;
  ee += 5;
  *at = ee;
  DWORD n = 0;
  if (!CryptStringToBinaryA(b, (DWORD)(ee - b), CRYPT_STRING_BASE64HEADER, NULL,
                            &n, NULL, NULL) ||
      n == 0)
    return -1;
  unsigned char *p = taxi__malloc(n);
  if (!p) return -1;
  if (!CryptStringToBinaryA(b, (DWORD)(ee - b), CRYPT_STRING_BASE64HEADER, p,
                            &n, NULL, NULL)) {
    taxi__free(p);
    return -1;
  }
  *der = p;
  *dlen = n;
  return 1;
}

/* Every certificate of a PEM file into store: how many, or an error. */
static int load_certs(HCERTSTORE store, const char *path, PCCERT_CONTEXT *first,
                      char *why, size_t cap) {
  char *text;
  size_t len;
  int rc = read_file(path, &text, &len, why, cap);
  if (rc < 0) return rc;
  const char *at = text;
  int count = 0;
  char label[64];
  unsigned char *der;
  DWORD dlen;
  for (;;) {
    int r = pem_next(&at, label, sizeof label, &der, &dlen);
    if (r == 0) break;
    if (r < 0) {
      snprintf(why, cap, "%s: a PEM block that does not decode", path);
      rc = TAXI_ETLS;
      break;
    }
    if (strcmp(label, "CERTIFICATE") != 0 &&
        strcmp(label, "TRUSTED CERTIFICATE") != 0) {
      taxi__free(der);
      continue;
    }
    PCCERT_CONTEXT c = NULL;
    BOOL ok = CertAddEncodedCertificateToStore(
        store, X509_ASN_ENCODING, der, dlen, CERT_STORE_ADD_USE_EXISTING,
        first && count == 0 ? &c : NULL);
    DWORD err = GetLastError();
    taxi__free(der);
    if (!ok) {
      char what[300];
      snprintf(what, sizeof what, "%s: certificate %d", path, count + 1);
      taxi__sch_why(why, cap, what, err);
      rc = TAXI_ETLS;
      break;
    }
    if (first && count == 0) *first = c;
    count++;
  }
  taxi__free(text);
  if (rc == 0 && count == 0) {
    snprintf(why, cap, "%s: no PEM certificate in it", path);
    rc = TAXI_ETLS;
  }
  return rc < 0 ? rc : count;
}

int taxi__sch_ca_load(sch_ctx_t *ec, const char *ca_file, char *why,
                      size_t cap) {
  ec->ca = CertOpenStore(CERT_STORE_PROV_MEMORY, 0, 0,
                         CERT_STORE_CREATE_NEW_FLAG, NULL);
  if (!ec->ca) return TAXI_ENOMEM;
  int n = load_certs(ec->ca, ca_file, NULL, why, cap);
  return n < 0 ? n : 0;
}

/* ---- the server's key -----------------------------------------------------
 */

/* A DER element at p (n bytes): its tag, and its contents in *c, *clen;
 * the bytes it takes in *used.  0, or -1 if malformed. */
static int der_elem(const unsigned char *p, size_t n, unsigned char *tag,
                    const unsigned char **c, size_t *clen, size_t *used) {
  if (n < 2) return -1;
  *tag = p[0];
  size_t len = p[1], h = 2;
  if (len & 0x80) {
    size_t k = len & 0x7f;
    if (k == 0 || k > 4 || n < 2 + k) return -1;
    len = 0;
    for (size_t i = 0; i < k; i++) len = (len << 8) | p[2 + i];
    h += k;
  }
  if (len > n - h) return -1;
  *c = p + h;
  *clen = len;
  *used = h + len;
  return 0;
}

static const unsigned char OID_RSA[] = {0x2a, 0x86, 0x48, 0x86, 0xf7,
                                        0x0d, 0x01, 0x01, 0x01};
static const unsigned char OID_EC[] = {0x2a, 0x86, 0x48, 0xce,
                                       0x3d, 0x02, 0x01};

/* PKCS#8's PrivateKeyInfo: SEQUENCE { INTEGER, SEQUENCE { OID, ... },
 * OCTET STRING key }.  The algorithm ("rsa", "ec" or "other") and the
 * inner key's bytes: 0 or -1. */
static int pkcs8_split(const unsigned char *p, size_t n, const char **alg,
                       const unsigned char **key, size_t *klen) {
  unsigned char tag;
  const unsigned char *c, *a, *oid;
  size_t cl, used, al, ol;
  if (der_elem(p, n, &tag, &c, &cl, &used) < 0 || tag != 0x30) return -1;
  if (der_elem(c, cl, &tag, &a, &al, &used) < 0 || tag != 0x02) return -1;
  c += used, cl -= used;
  if (der_elem(c, cl, &tag, &a, &al, &used) < 0 || tag != 0x30) return -1;
  c += used, cl -= used;
  if (der_elem(a, al, &tag, &oid, &ol, &used) < 0 || tag != 0x06) return -1;
  *alg = ol == sizeof OID_RSA && memcmp(oid, OID_RSA, ol) == 0 ? "rsa"
         : ol == sizeof OID_EC && memcmp(oid, OID_EC, ol) == 0 ? "ec"
                                                               : "other";
  if (der_elem(c, cl, &tag, key, klen, &used) < 0 || tag != 0x04) return -1;
  return 0;
}

static atomic_uint containers;

static void key_name(sch_ctx_t *ec);
static bool key_matches(const sch_ctx_t *ec, HCRYPTPROV_OR_NCRYPT_KEY_HANDLE h,
                        DWORD spec);

/* RSA's PKCS#1 key (DER) into a new container of ec, bound to ec->cert. */
static int import_rsa(sch_ctx_t *ec, const unsigned char *der, size_t dlen,
                      const char *path, char *why, size_t cap) {
  BYTE *blob = NULL;
  DWORD blen = 0;
  if (!CryptDecodeObjectEx(X509_ASN_ENCODING, PKCS_RSA_PRIVATE_KEY, der,
                           (DWORD)dlen, CRYPT_DECODE_ALLOC_FLAG, NULL, &blob,
                           &blen)) {
    char what[300];
    snprintf(what, sizeof what, "o.key_file: %s: not an RSA key", path);
    taxi__sch_why(why, cap, what, GetLastError());
    return TAXI_ETLS;
  }
  key_name(ec);
  HCRYPTPROV prov = 0;
  /* A container left by a process that had this id and died. */
  CryptAcquireContextW(&prov, ec->container, MS_ENH_RSA_AES_PROV_W,
                       PROV_RSA_AES, CRYPT_DELETEKEYSET);
  prov = 0;
  int rc = TAXI_ETLS;
  if (!CryptAcquireContextW(&prov, ec->container, MS_ENH_RSA_AES_PROV_W,
                            PROV_RSA_AES, CRYPT_NEWKEYSET)) {
    taxi__sch_why(why, cap, "o.key_file: a key container", GetLastError());
    LocalFree(blob);
    return rc;
  }
  ec->have_container = true;
  HCRYPTKEY key = 0;
  /* Exportable: wine's SChannel exports it to give it to GnuTLS. */
  BOOL ok = CryptImportKey(prov, blob, blen, 0, CRYPT_EXPORTABLE, &key);
  DWORD err = GetLastError();
  LocalFree(blob);
  if (!ok) {
    taxi__sch_why(why, cap, "o.key_file: the key's import", err);
    goto out;
  }
  CryptDestroyKey(key);
  /* The key must be the certificate's. */
  if (!key_matches(ec, prov, AT_KEYEXCHANGE)) {
    snprintf(why, cap, "o.key_file: not the certificate's key");
    goto out;
  }
  CRYPT_KEY_PROV_INFO info;
  memset(&info, 0, sizeof info);
  info.pwszContainerName = ec->container;
  info.pwszProvName = (LPWSTR)MS_ENH_RSA_AES_PROV_W;
  info.dwProvType = PROV_RSA_AES;
  info.dwKeySpec = AT_KEYEXCHANGE;
  if (!CertSetCertificateContextProperty(ec->cert, CERT_KEY_PROV_INFO_PROP_ID,
                                         0, &info)) {
    taxi__sch_why(why, cap, "o.key_file: binding the key to the certificate",
                  GetLastError());
    goto out;
  }
  rc = 0;
out:
  CryptReleaseContext(prov, 0);
  return rc;
}

/* A name of its own for a key of this context. */
static void key_name(sch_ctx_t *ec) {
  swprintf(ec->container, sizeof ec->container / sizeof ec->container[0],
           L"taxi-tls-%lu-%u", (unsigned long)GetCurrentProcessId(),
           atomic_fetch_add(&containers, 1));
}

/* Whether the key behind prov_or_key (spec: AT_KEYEXCHANGE for a
 * CryptoAPI container, CERT_NCRYPT_KEY_SPEC for a CNG key) is the one of
 * the certificate. */
static bool key_matches(const sch_ctx_t *ec, HCRYPTPROV_OR_NCRYPT_KEY_HANDLE h,
                        DWORD spec) {
  DWORD plen = 0;
  CERT_PUBLIC_KEY_INFO *pub = NULL;
  bool same = true; /* a key whose public half cannot be read: SChannel
                     * finds out at the handshake */
  if (CryptExportPublicKeyInfo(h, spec, X509_ASN_ENCODING, NULL, &plen) &&
      (pub = taxi__malloc(plen)) != NULL &&
      CryptExportPublicKeyInfo(h, spec, X509_ASN_ENCODING, pub, &plen))
    same = CertComparePublicKeyInfo(X509_ASN_ENCODING,
                                    &ec->cert->pCertInfo->SubjectPublicKeyInfo,
                                    pub) != FALSE;
  taxi__free(pub);
  return same;
}

typedef SECURITY_STATUS(WINAPI *open_kp_fn)(NCRYPT_PROV_HANDLE *, LPCWSTR,
                                            DWORD);
typedef SECURITY_STATUS(WINAPI *import_fn)(NCRYPT_PROV_HANDLE,
                                           NCRYPT_KEY_HANDLE, LPCWSTR,
                                           NCryptBufferDesc *,
                                           NCRYPT_KEY_HANDLE *, PBYTE, DWORD,
                                           DWORD);
typedef SECURITY_STATUS(WINAPI *delete_fn)(NCRYPT_KEY_HANDLE, DWORD);
typedef SECURITY_STATUS(WINAPI *free_fn)(NCRYPT_HANDLE);

static struct {
  open_kp_fn open;
  import_fn import;
  delete_fn del;
  free_fn free;
} cng;

/* ncrypt.dll's four functions, once (never unloaded): 0 or -1. */
static int cng_load(void) {
  static atomic_int state; /* 0: not tried, 1: there, -1: not */
  int st = atomic_load(&state);
  if (st) return st > 0 ? 0 : -1;
  HMODULE m = LoadLibraryW(L"ncrypt.dll");
  FARPROC f[4] = {NULL, NULL, NULL, NULL};
  if (m) {
    f[0] = GetProcAddress(m, "NCryptOpenStorageProvider");
    f[1] = GetProcAddress(m, "NCryptImportKey");
    f[2] = GetProcAddress(m, "NCryptDeleteKey");
    f[3] = GetProcAddress(m, "NCryptFreeObject");
  }
  if (f[0] && f[1] && f[2] && f[3]) {
    /* Casts through void (*)(void): the functions' own types. */
    cng.open = (open_kp_fn)(void (*)(void))f[0];
    cng.import = (import_fn)(void (*)(void))f[1];
    cng.del = (delete_fn)(void (*)(void))f[2];
    cng.free = (free_fn)(void (*)(void))f[3];
  }
  atomic_store(&state, f[0] && f[1] && f[2] && f[3] ? 1 : -1);
  return atomic_load(&state) > 0 ? 0 : -1;
}

/* An EC key (the whole PKCS#8 DER) into a persisted CNG key of ec, bound
 * to ec->cert. */
static int import_ec(sch_ctx_t *ec, const unsigned char *der, size_t dlen,
                     const char *path, char *why, size_t cap) {
  if (cng_load() < 0) {
    snprintf(why, cap,
             "o.key_file: %s: an EC key, and this system has no CNG "
             "(ncrypt.dll) to hold it: use an RSA key",
             path);
    return TAXI_ETLS;
  }
  key_name(ec);
  NCRYPT_PROV_HANDLE prov = 0;
  SECURITY_STATUS st = cng.open(&prov, MS_KEY_STORAGE_PROVIDER, 0);
  if (st != ERROR_SUCCESS) {
    taxi__sch_why(why, cap, "o.key_file: an EC key: the key storage provider",
                  (unsigned long)st);
    return TAXI_ETLS;
  }
  ec->cng_prov = prov;
  NCryptBuffer nb = {(ULONG)((wcslen(ec->container) + 1) * sizeof(wchar_t)),
                     NCRYPTBUFFER_PKCS_KEY_NAME, ec->container};
  NCryptBufferDesc nd = {NCRYPTBUFFER_VERSION, 1, &nb};
  NCRYPT_KEY_HANDLE key = 0;
  st = cng.import(prov, 0, NCRYPT_PKCS8_PRIVATE_KEY_BLOB, &nd, &key, (PBYTE)der,
                  (DWORD)dlen, NCRYPT_OVERWRITE_KEY_FLAG);
  if (st != ERROR_SUCCESS) {
    char what[300];
    snprintf(what, sizeof what,
             "o.key_file: %s: the EC key's import into CNG (an RSA key "
             "works everywhere)",
             path);
    taxi__sch_why(why, cap, what, (unsigned long)st);
    return TAXI_ETLS;
  }
  ec->cng_key = key;
  if (!key_matches(ec, key, CERT_NCRYPT_KEY_SPEC)) {
    snprintf(why, cap, "o.key_file: not the certificate's key");
    return TAXI_ETLS;
  }
  CRYPT_KEY_PROV_INFO info;
  memset(&info, 0, sizeof info);
  info.pwszContainerName = ec->container;
  info.pwszProvName = (LPWSTR)MS_KEY_STORAGE_PROVIDER;
  info.dwProvType = 0; /* CNG */
  if (!CertSetCertificateContextProperty(ec->cert, CERT_KEY_PROV_INFO_PROP_ID,
                                         0, &info)) {
    taxi__sch_why(why, cap, "o.key_file: binding the key to the certificate",
                  GetLastError());
    return TAXI_ETLS;
  }
  return 0;
}

int taxi__sch_server_cert(sch_ctx_t *ec, const char *cert_file,
                          const char *key_file, char *why, size_t cap) {
  ec->chain = CertOpenStore(CERT_STORE_PROV_MEMORY, 0, 0,
                            CERT_STORE_CREATE_NEW_FLAG, NULL);
  if (!ec->chain) return TAXI_ENOMEM;
  int n = load_certs(ec->chain, cert_file, &ec->cert, why, cap);
  if (n < 0) {
    if (n == TAXI_ETLS && strstr(why, "no PEM certificate"))
      snprintf(why, cap, "o.cert_file: %s: no PEM certificate in it",
               cert_file);
    return n;
  }
  char *text;
  size_t len;
  int rc = read_file(key_file, &text, &len, why, cap);
  if (rc < 0) return rc;
  const char *at = text;
  char label[64];
  unsigned char *der = NULL;
  DWORD dlen = 0;
  int r;
  /* The first key block (a "EC PARAMETERS" block may come before). */
  while ((r = pem_next(&at, label, sizeof label, &der, &dlen)) == 1 &&
         !strstr(label, "PRIVATE KEY"))
    taxi__free(der);
  taxi__free(text);
  if (r != 1) {
    snprintf(why, cap, "o.key_file: %s: no PEM private key in it", key_file);
    return TAXI_ETLS;
  }
  rc = TAXI_ETLS;
  if (strcmp(label, "RSA PRIVATE KEY") == 0) {
    rc = import_rsa(ec, der, dlen, key_file, why, cap);
  } else if (strcmp(label, "PRIVATE KEY") == 0) {
    const char *alg;
    const unsigned char *key;
    size_t klen;
    if (pkcs8_split(der, dlen, &alg, &key, &klen) < 0)
      snprintf(why, cap, "o.key_file: %s: a malformed PKCS#8 key", key_file);
    else if (strcmp(alg, "rsa") == 0)
      rc = import_rsa(ec, key, klen, key_file, why, cap);
    else if (strcmp(alg, "ec") == 0)
      rc = import_ec(ec, der, dlen, key_file, why, cap);
    else
      snprintf(why, cap,
               "o.key_file: %s: a key of an algorithm the SChannel engine "
               "does not take (RSA or EC)",
               key_file);
  } else {
    snprintf(why, cap,
             "o.key_file: %s: a \"%s\" block; the SChannel engine takes "
             "unencrypted PKCS#8 (RSA or EC) or PKCS#1 RSA keys",
             key_file, label);
  }
  SecureZeroMemory(der, dlen);
  taxi__free(der);
  return rc;
}

void taxi__sch_cert_free(sch_ctx_t *ec) {
  if (ec->cert) CertFreeCertificateContext(ec->cert);
  if (ec->chain) CertCloseStore(ec->chain, 0);
  if (ec->ca) CertCloseStore(ec->ca, 0);
  if (ec->have_container) {
    HCRYPTPROV prov = 0;
    CryptAcquireContextW(&prov, ec->container, MS_ENH_RSA_AES_PROV_W,
                         PROV_RSA_AES, CRYPT_DELETEKEYSET);
  }
  if (ec->cng_key) cng.del(ec->cng_key, 0); /* and frees the handle */
  if (ec->cng_prov) cng.free(ec->cng_prov);
  ec->cng_key = ec->cng_prov = 0;
  ec->cert = NULL;
  ec->chain = ec->ca = NULL;
  ec->have_container = false;
}

/* ---- the client's check ---------------------------------------------------
 */

/* name as an IP address (4 or 16 bytes into ip): its length, or 0. */
static size_t ip_of(const char *name, unsigned char ip[16]) {
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, name, &a4) == 1) {
    memcpy(ip, &a4, 4);
    return 4;
  }
  if (inet_pton(AF_INET6, name, &a6) == 1) {
    memcpy(ip, &a6, 16);
    return 16;
  }
  return 0;
}

/* Whether the certificate names the IP address ip among its
 * subjectAltName entries. */
static bool names_ip(PCCERT_CONTEXT c, const unsigned char *ip, size_t len) {
  PCERT_EXTENSION ext =
      CertFindExtension(szOID_SUBJECT_ALT_NAME2, c->pCertInfo->cExtension,
                        c->pCertInfo->rgExtension);
  if (!ext) return false;
  CERT_ALT_NAME_INFO *alt = NULL;
  DWORD n = 0;
  if (!CryptDecodeObjectEx(X509_ASN_ENCODING, X509_ALTERNATE_NAME,
                           ext->Value.pbData, ext->Value.cbData,
                           CRYPT_DECODE_ALLOC_FLAG, NULL, &alt, &n))
    return false;
  bool found = false;
  for (DWORD i = 0; i < alt->cAltEntry && !found; i++) {
    CERT_ALT_NAME_ENTRY *e = &alt->rgAltEntry[i];
    found = e->dwAltNameChoice == CERT_ALT_NAME_IP_ADDRESS &&
            e->IPAddress.cbData == len &&
            memcmp(e->IPAddress.pbData, ip, len) == 0;
  }
  LocalFree(alt);
  return found;
}

/* The chain's trouble in OpenSSL's words, or NULL. */
static const char *chain_trouble(DWORD status) {
  if (status & CERT_TRUST_IS_NOT_TIME_VALID) return "certificate has expired";
  if (status & (CERT_TRUST_IS_UNTRUSTED_ROOT | CERT_TRUST_IS_PARTIAL_CHAIN))
    return "unable to get local issuer certificate";
  if (status & CERT_TRUST_IS_NOT_SIGNATURE_VALID)
    return "certificate signature failure";
  if (status & CERT_TRUST_IS_REVOKED) return "certificate revoked";
  if (status & CERT_TRUST_IS_NOT_VALID_FOR_USAGE)
    return "unsupported certificate purpose";
  if (status) return "the chain was refused";
  return NULL;
}

int taxi__sch_verify(const sch_ctx_t *ec, PCCERT_CONTEXT peer, const char *name,
                     char *why, size_t cap) {
  /* The certificates the server sent, and ca_file's. */
  HCERTSTORE all = CertOpenStore(CERT_STORE_PROV_COLLECTION, 0, 0,
                                 CERT_STORE_CREATE_NEW_FLAG, NULL);
  if (!all) {
    snprintf(why, cap, "certificate verify failed: out of memory");
    return TAXI_EBADCERT;
  }
  if (peer->hCertStore) CertAddStoreToCollection(all, peer->hCertStore, 0, 0);
  if (ec->ca) CertAddStoreToCollection(all, ec->ca, 0, 0);
  CERT_CHAIN_PARA para;
  memset(&para, 0, sizeof para);
  para.cbSize = sizeof para;
  PCCERT_CHAIN_CONTEXT chain = NULL;
  int rc = TAXI_EBADCERT;
  if (!CertGetCertificateChain(NULL, peer, NULL, all, &para, 0, NULL, &chain)) {
    taxi__sch_why(why, cap, "certificate verify failed", GetLastError());
    CertCloseStore(all, 0);
    return rc;
  }
  DWORD status = chain->TrustStatus.dwErrorStatus;
  /* Revocation is not checked (no CRL nor OCSP asked for). */
  status &= ~(DWORD)(CERT_TRUST_REVOCATION_STATUS_UNKNOWN |
                     CERT_TRUST_IS_OFFLINE_REVOCATION);
  const char *bad = NULL;
  if (ec->ca) {
    /* The exclusive root: the chain must end in one of ca_file's. */
    PCERT_SIMPLE_CHAIN s = chain->cChain ? chain->rgpChain[0] : NULL;
    PCCERT_CONTEXT root =
        s && s->cElement ? s->rgpElement[s->cElement - 1]->pCertContext : NULL;
    PCCERT_CONTEXT mine =
        root ? CertFindCertificateInStore(ec->ca, X509_ASN_ENCODING, 0,
                                          CERT_FIND_EXISTING, root, NULL)
             : NULL;
    if (mine) {
      CertFreeCertificateContext(mine);
      status &= ~(DWORD)CERT_TRUST_IS_UNTRUSTED_ROOT;
    } else {
      bad = "unable to get local issuer certificate";
    }
  }
  if (!bad) bad = chain_trouble(status);
  if (!bad && name) {
    unsigned char ip[16];
    size_t iplen = ip_of(name, ip);
    wchar_t wname[256];
    SSL_EXTRA_CERT_CHAIN_POLICY_PARA ssl;
    memset(&ssl, 0, sizeof ssl);
    ssl.cbSize = sizeof ssl;
    ssl.dwAuthType = AUTHTYPE_SERVER;
    /* What the chain's check above settled already. */
    ssl.fdwChecks = SECURITY_FLAG_IGNORE_UNKNOWN_CA |
                    SECURITY_FLAG_IGNORE_REVOCATION |
                    SECURITY_FLAG_IGNORE_WRONG_USAGE;
    if (iplen) {
      ssl.fdwChecks |= SECURITY_FLAG_IGNORE_CERT_CN_INVALID;
      if (!names_ip(peer, ip, iplen)) bad = "IP address mismatch";
    } else if (MultiByteToWideChar(CP_UTF8, 0, name, -1, wname, 256) > 0) {
      ssl.pwszServerName = wname;
    } else {
      bad = "hostname mismatch";
    }
    CERT_CHAIN_POLICY_PARA pp;
    memset(&pp, 0, sizeof pp);
    pp.cbSize = sizeof pp;
    pp.pvExtraPolicyPara = &ssl;
    CERT_CHAIN_POLICY_STATUS ps;
    memset(&ps, 0, sizeof ps);
    ps.cbSize = sizeof ps;
    if (!bad && (!CertVerifyCertificateChainPolicy(CERT_CHAIN_POLICY_SSL, chain,
                                                   &pp, &ps) ||
                 ps.dwError)) {
      if (ps.dwError == (DWORD)CERT_E_CN_NO_MATCH)
        bad = "hostname mismatch";
      else if (ps.dwError == (DWORD)CERT_E_EXPIRED)
        bad = "certificate has expired";
      else
        taxi__sch_why(why, cap, "certificate verify failed",
                      ps.dwError ? ps.dwError : GetLastError());
      if (!bad) {
        CertFreeCertificateChain(chain);
        CertCloseStore(all, 0);
        return rc;
      }
    }
  }
  CertFreeCertificateChain(chain);
  CertCloseStore(all, 0);
  if (bad) {
    snprintf(why, cap, "certificate verify failed: %s", bad);
    return rc;
  }
  return 0;
}
