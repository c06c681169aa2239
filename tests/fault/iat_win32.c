/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fault/iat_win32.c - fault injection on Windows: the calls libtaxi
 * makes to Winsock and kernel32, counted and made to fail, for the
 * in-process fault tests (tests/fault/inproc.c).
 *
 * Why not the LD_PRELOAD module (fault.c): Windows has no preloading nor
 * symbol interposition; a DLL calls another DLL's functions through its own
 * import address table (IAT), one pointer per imported function, filled
 * in by the loader.  So this layer, linked into the test program, rewrites
 * those pointers in the module that holds libtaxi (libtaxi-0.dll, or the
 * program itself in a static build): it finds the module from the address
 * of taxi_reactor_create, walks its import descriptors, and for each
 * function below replaces the IAT entry (made writable for the moment with
 * VirtualProtect) with a wrapper that counts the call and, when an armed
 * rule says so, fails it as the system would, without making it; else it
 * calls the original.  Only the library's calls go through its IAT: the
 * test program's own calls to the same functions are neither counted nor
 * failed.
 *
 * The rules are those of fault.c (parsed by rules.c), with the sites and
 * error names of Windows:
 *   NAME   a wrapped function (see SITES below), or
 *            send@wakeup, recv@wakeup  send and recv on a socket libtaxi
 *                     made itself (WSASocketW, or accept on such a
 *                     listener): the socket pairs of its wake-up channels;
 *                     a plain send or recv rule fails only the others;
 *   WHAT   a Winsock or Win32 error name (WSAEINTR, WSAEWOULDBLOCK,
 *          WSAENOBUFS, WSAECONNRESET, ERROR_NOT_ENOUGH_MEMORY, ...; see
 *          `errnames`; default WSAEINTR), or one of fault.c's errno names
 *          (ENOMEM, EINVAL, EMFILE, ...), which stands for the error of
 *          that meaning in the call's family (ENOMEM: WSAENOBUFS for
 *          Winsock, ERROR_NOT_ENOUGH_MEMORY for kernel32), or "short" for
 *          send, recv, WSASend and WSARecv.  A Winsock call then returns
 * SOCKET_ERROR (INVALID_SOCKET, or FALSE) with WSASetLastError(WHAT); a
 * kernel32 call returns FALSE (NULL for CreateIoCompletionPort) with
 *          SetLastError(WHAT); GetQueuedCompletionStatusEx also reports no
 *          entries removed (with WAIT_TIMEOUT: a wait that timed out).
 * The environment variables of fault.c (TAXI_FAULT, ..._AFTER, ...) are
 * not read: tests arm at run time, with fault_arm().
 */
#include "config.h"

#ifdef _WIN32

#include <winsock2.h>
#include <mswsock.h>
#include <windows.h>

#include <errno.h>
#include <string.h>

#include "fault.h"
#include "rules.h"
#include "taxi/taxi.h"

/* X(id, "name"): the sites, wrapped functions first (in `hooks` order). */
#define SITES(X)                                                \
  X(select, "select")                                           \
  X(WSAPoll, "WSAPoll")                                         \
  X(send, "send")                                               \
  X(recv, "recv")                                               \
  X(WSASend, "WSASend")                                         \
  X(WSARecv, "WSARecv")                                         \
  X(accept, "accept")                                           \
  X(connect, "connect")                                         \
  X(socket, "socket")                                           \
  X(WSASocketW, "WSASocketW")                                   \
  X(ioctlsocket, "ioctlsocket")                                 \
  X(WSAIoctl, "WSAIoctl")                                       \
  X(GetQueuedCompletionStatusEx, "GetQueuedCompletionStatusEx") \
  X(PostQueuedCompletionStatus, "PostQueuedCompletionStatus")   \
  X(CreateIoCompletionPort, "CreateIoCompletionPort")           \
  X(ReadFile, "ReadFile")                                       \
  X(WriteFile, "WriteFile")                                     \
  X(TransmitFile, "TransmitFile")                               \
  X(send_wakeup, "send@wakeup")                                 \
  X(recv_wakeup, "recv@wakeup")

enum {
#define AS_ENUM(id, name) SITE_##id,
  SITES(AS_ENUM)
#undef AS_ENUM
      NSITES
};

static const char *const site_names[NSITES] = {
#define AS_NAME(id, name) name,
    SITES(AS_NAME)
#undef AS_NAME
};

/* Above every Winsock and Win32 error: the errno names' values. */
#define POSIX 0x40000000

#define E(name) \
  { #name, name }
static const fault_errname_t errnames[] = {
    E(WSAEINTR),
    E(WSAEWOULDBLOCK),
    E(WSAENOBUFS),
    E(WSAECONNRESET),
    E(WSAECONNABORTED),
    E(WSAENETRESET),
    E(WSAESHUTDOWN),
    E(WSAENOTSOCK),
    E(WSAEINVAL),
    E(WSAEMFILE),
    E(WSAENETDOWN),
    E(ERROR_NOT_ENOUGH_MEMORY),
    E(ERROR_NO_SYSTEM_RESOURCES),
    E(ERROR_INVALID_HANDLE),
    E(ERROR_INVALID_PARAMETER),
    E(ERROR_OPERATION_ABORTED),
    E(ERROR_NETNAME_DELETED),
    E(ERROR_BROKEN_PIPE),
    E(WAIT_TIMEOUT),
    /* The errno names of fault.c, each the error of its meaning in the
     * family of the call failed (see posix_error): a test written for the
     * module runs here as it is. */
    {"EINTR", POSIX + EINTR},
    {"EAGAIN", POSIX + EAGAIN},
    {"ENOMEM", POSIX + ENOMEM},
    {"ENOBUFS", POSIX + ENOBUFS},
    {"EMFILE", POSIX + EMFILE},
    {"ENFILE", POSIX + ENFILE},
    {"ECONNRESET", POSIX + ECONNRESET},
    {"ECONNABORTED", POSIX + ECONNABORTED},
    {"EPIPE", POSIX + EPIPE},
    {"EBADF", POSIX + EBADF},
    {"EINVAL", POSIX + EINVAL},
    {"ETIMEDOUT", POSIX + ETIMEDOUT},
};
#undef E

/* A POSIX errno name as the Winsock (winsock true) or Win32 error. */
static int posix_error(int what, bool winsock) {
  if (what < POSIX) return what;
  switch (what - POSIX) {
    case EINTR:
      return winsock ? WSAEINTR : ERROR_OPERATION_ABORTED;
    case EAGAIN:
      return winsock ? WSAEWOULDBLOCK : ERROR_NO_SYSTEM_RESOURCES;
    case ENOMEM:
      return winsock ? WSAENOBUFS : ERROR_NOT_ENOUGH_MEMORY;
    case ENOBUFS:
      return winsock ? WSAENOBUFS : ERROR_NO_SYSTEM_RESOURCES;
    case EMFILE:
    case ENFILE:
      return winsock ? WSAEMFILE : ERROR_TOO_MANY_OPEN_FILES;
    case ECONNRESET:
      return winsock ? WSAECONNRESET : ERROR_NETNAME_DELETED;
    case ECONNABORTED:
      return winsock ? WSAECONNABORTED : ERROR_CONNECTION_ABORTED;
    case EPIPE:
      return winsock ? WSAESHUTDOWN : ERROR_BROKEN_PIPE;
    case EBADF:
      return winsock ? WSAENOTSOCK : ERROR_INVALID_HANDLE;
    case ETIMEDOUT:
      return winsock ? WSAETIMEDOUT : WAIT_TIMEOUT;
    default: /* EINVAL */
      return winsock ? WSAEINVAL : ERROR_INVALID_PARAMETER;
  }
}

_Static_assert(NSITES <= FAULT_MAX_SITES, "FAULT_MAX_SITES is too small");

static fault_rules_t set = {
    .sites = site_names,
    .nsites = NSITES,
    .errors = errnames,
    .nerrors = sizeof errnames / sizeof errnames[0],
    .default_what = WSAEINTR,
    .arming = ATOMIC_FLAG_INIT,
};

static int decide(int site) {
  fault_rules_count(&set, site);
  return fault_rules_decide(&set, site);
}

/* ---- the sockets libtaxi made itself (its socket pairs) ------------------ */

#define MAX_OWN 256
static SOCKET own[MAX_OWN];
static SRWLOCK own_lock = SRWLOCK_INIT;

static void own_set(SOCKET s, bool on) {
  if (s == INVALID_SOCKET) return;
  AcquireSRWLockExclusive(&own_lock);
  int free_at = -1;
  for (int i = 0; i < MAX_OWN; i++) {
    if (own[i] == s) {
      if (!on) own[i] = 0;
      ReleaseSRWLockExclusive(&own_lock);
      return;
    }
    if (own[i] == 0 && free_at < 0) free_at = i;
  }
  if (on && free_at >= 0) own[free_at] = s;
  ReleaseSRWLockExclusive(&own_lock);
}

static bool own_has(SOCKET s) {
  bool found = false;
  AcquireSRWLockShared(&own_lock);
  for (int i = 0; i < MAX_OWN && !found; i++) found = own[i] == s;
  ReleaseSRWLockShared(&own_lock);
  return found;
}

/* A send or recv: on one of libtaxi's own sockets, the @wakeup site's rules
 * decide (the plain call is only counted); on any other, the plain call's. */
static int decide_io(int plain, int wakeup, SOCKET s) {
  if (!own_has(s)) return decide(plain);
  fault_rules_count(&set, plain);
  return decide(wakeup);
}

/* ---- the wrappers ---------------------------------------------------------
 * Named w_* and calling the originals through real_*: the test build
 * force-includes tests/win32/compat.h, whose macros rename send, recv,
 * socket, accept and connect where they are followed by "(". */

typedef int(WSAAPI *select_fn)(int, fd_set *, fd_set *, fd_set *,
                               const struct timeval *);
typedef int(WSAAPI *wsapoll_fn)(WSAPOLLFD *, ULONG, INT);
typedef int(WSAAPI *send_fn)(SOCKET, const char *, int, int);
typedef int(WSAAPI *recv_fn)(SOCKET, char *, int, int);
typedef int(WSAAPI *wsasend_fn)(SOCKET, WSABUF *, DWORD, DWORD *, DWORD,
                                WSAOVERLAPPED *,
                                LPWSAOVERLAPPED_COMPLETION_ROUTINE);
typedef int(WSAAPI *wsarecv_fn)(SOCKET, WSABUF *, DWORD, DWORD *, DWORD *,
                                WSAOVERLAPPED *,
                                LPWSAOVERLAPPED_COMPLETION_ROUTINE);
typedef SOCKET(WSAAPI *accept_fn)(SOCKET, struct sockaddr *, int *);
typedef int(WSAAPI *connect_fn)(SOCKET, const struct sockaddr *, int);
typedef SOCKET(WSAAPI *socket_fn)(int, int, int);
typedef SOCKET(WSAAPI *wsasocketw_fn)(int, int, int, WSAPROTOCOL_INFOW *, GROUP,
                                      DWORD);
typedef int(WSAAPI *closesocket_fn)(SOCKET);
typedef int(WSAAPI *ioctlsocket_fn)(SOCKET, long, u_long *);
typedef int(WSAAPI *wsaioctl_fn)(SOCKET, DWORD, void *, DWORD, void *, DWORD,
                                 DWORD *, WSAOVERLAPPED *,
                                 LPWSAOVERLAPPED_COMPLETION_ROUTINE);
typedef BOOL(WINAPI *gqcsex_fn)(HANDLE, OVERLAPPED_ENTRY *, ULONG, ULONG *,
                                DWORD, BOOL);
typedef BOOL(WINAPI *pqcs_fn)(HANDLE, DWORD, ULONG_PTR, OVERLAPPED *);
typedef HANDLE(WINAPI *ciocp_fn)(HANDLE, HANDLE, ULONG_PTR, DWORD);
typedef BOOL(WINAPI *readfile_fn)(HANDLE, void *, DWORD, DWORD *, OVERLAPPED *);
typedef BOOL(WINAPI *writefile_fn)(HANDLE, const void *, DWORD, DWORD *,
                                   OVERLAPPED *);

static select_fn real_select;
static wsapoll_fn real_WSAPoll;
static send_fn real_send;
static recv_fn real_recv;
static wsasend_fn real_WSASend;
static wsarecv_fn real_WSARecv;
static accept_fn real_accept;
static connect_fn real_connect;
static socket_fn real_socket;
static wsasocketw_fn real_WSASocketW;
static closesocket_fn real_closesocket;
static ioctlsocket_fn real_ioctlsocket;
static wsaioctl_fn real_WSAIoctl;
static gqcsex_fn real_GetQueuedCompletionStatusEx;
static pqcs_fn real_PostQueuedCompletionStatus;
static ciocp_fn real_CreateIoCompletionPort;
static readfile_fn real_ReadFile;
static writefile_fn real_WriteFile;

/* A Winsock failure: the error, and the call's failure value. */
#define WSA_FAIL(what, value)                 \
  do {                                        \
    WSASetLastError(posix_error(what, true)); \
    return (value);                           \
  } while (0)
#define WIN_FAIL(what, value)                      \
  do {                                             \
    SetLastError((DWORD)posix_error(what, false)); \
    return (value);                                \
  } while (0)

static int shorter(int len) { return len > 1 ? len / 2 : len; }

/* A short vectored transfer: the first buffer only, itself shortened if it
 * is the only one (Winsock takes its copy of the array at the call). */
static DWORD shorter_bufs(const WSABUF *bufs, DWORD n, WSABUF *one) {
  if (n == 0) return 0;
  *one = bufs[0];
  if (n == 1) one->len = (ULONG)shorter((int)one->len);
  return 1;
}

static int WSAAPI w_select(int n, fd_set *r, fd_set *w, fd_set *e,
                           const struct timeval *tv) {
  int what = decide(SITE_select);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_select(n, r, w, e, tv);
}

static int WSAAPI w_WSAPoll(WSAPOLLFD *fds, ULONG n, INT timeout) {
  int what = decide(SITE_WSAPoll);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_WSAPoll(fds, n, timeout);
}

static int WSAAPI w_send(SOCKET s, const char *buf, int len, int flags) {
  int what = decide_io(SITE_send, SITE_send_wakeup, s);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_send(s, buf, what == FAULT_WHAT_SHORT ? shorter(len) : len,
                   flags);
}

static int WSAAPI w_recv(SOCKET s, char *buf, int len, int flags) {
  int what = decide_io(SITE_recv, SITE_recv_wakeup, s);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_recv(s, buf, what == FAULT_WHAT_SHORT ? shorter(len) : len,
                   flags);
}

static int WSAAPI w_WSASend(SOCKET s, WSABUF *bufs, DWORD n, DWORD *sent,
                            DWORD flags, WSAOVERLAPPED *ov,
                            LPWSAOVERLAPPED_COMPLETION_ROUTINE done) {
  int what = decide(SITE_WSASend);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  WSABUF one;
  if (what == FAULT_WHAT_SHORT)
    return real_WSASend(s, &one, shorter_bufs(bufs, n, &one), sent, flags, ov,
                        done);
  return real_WSASend(s, bufs, n, sent, flags, ov, done);
}

static int WSAAPI w_WSARecv(SOCKET s, WSABUF *bufs, DWORD n, DWORD *got,
                            DWORD *flags, WSAOVERLAPPED *ov,
                            LPWSAOVERLAPPED_COMPLETION_ROUTINE done) {
  int what = decide(SITE_WSARecv);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  WSABUF one;
  if (what == FAULT_WHAT_SHORT)
    return real_WSARecv(s, &one, shorter_bufs(bufs, n, &one), got, flags, ov,
                        done);
  return real_WSARecv(s, bufs, n, got, flags, ov, done);
}

static SOCKET WSAAPI w_accept(SOCKET l, struct sockaddr *addr, int *len) {
  int what = decide(SITE_accept);
  if (what > 0) WSA_FAIL(what, INVALID_SOCKET);
  SOCKET s = real_accept(l, addr, len);
  if (s != INVALID_SOCKET && own_has(l)) own_set(s, true);
  return s;
}

static int WSAAPI w_connect(SOCKET s, const struct sockaddr *addr, int len) {
  int what = decide(SITE_connect);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_connect(s, addr, len);
}

static SOCKET WSAAPI w_socket(int af, int type, int proto) {
  int what = decide(SITE_socket);
  if (what > 0) WSA_FAIL(what, INVALID_SOCKET);
  SOCKET s = real_socket(af, type, proto);
  own_set(s, true);
  return s;
}

static SOCKET WSAAPI w_WSASocketW(int af, int type, int proto,
                                  WSAPROTOCOL_INFOW *info, GROUP g,
                                  DWORD flags) {
  int what = decide(SITE_WSASocketW);
  if (what > 0) WSA_FAIL(what, INVALID_SOCKET);
  SOCKET s = real_WSASocketW(af, type, proto, info, g, flags);
  own_set(s, true);
  return s;
}

/* Not a site: only forgets the socket (its value may come back). */
static int WSAAPI w_closesocket(SOCKET s) {
  own_set(s, false);
  return real_closesocket(s);
}

static int WSAAPI w_ioctlsocket(SOCKET s, long cmd, u_long *arg) {
  int what = decide(SITE_ioctlsocket);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  return real_ioctlsocket(s, cmd, arg);
}

static LPFN_TRANSMITFILE real_TransmitFile;

static BOOL PASCAL w_TransmitFile(SOCKET s, HANDLE file, DWORD len,
                                  DWORD per_send, OVERLAPPED *ov,
                                  TRANSMIT_FILE_BUFFERS *bufs, DWORD flags) {
  int what = decide(SITE_TransmitFile);
  if (what > 0) WSA_FAIL(what, FALSE);
  return real_TransmitFile(s, file, len, per_send, ov, bufs, flags);
}

/* TransmitFile is no import: libtaxi asks Winsock for it with WSAIoctl
 * (SIO_GET_EXTENSION_FUNCTION_POINTER), and gets the wrapper instead. */
static int WSAAPI w_WSAIoctl(SOCKET s, DWORD code, void *in, DWORD in_len,
                             void *out, DWORD out_len, DWORD *ret,
                             WSAOVERLAPPED *ov,
                             LPWSAOVERLAPPED_COMPLETION_ROUTINE done) {
  static const GUID transmit_file = WSAID_TRANSMITFILE;
  int what = decide(SITE_WSAIoctl);
  if (what > 0) WSA_FAIL(what, SOCKET_ERROR);
  int rc = real_WSAIoctl(s, code, in, in_len, out, out_len, ret, ov, done);
  if (rc == 0 && code == SIO_GET_EXTENSION_FUNCTION_POINTER && in &&
      in_len == sizeof transmit_file &&
      memcmp(in, &transmit_file, sizeof transmit_file) == 0 && out &&
      out_len >= sizeof real_TransmitFile) {
    memcpy(&real_TransmitFile, out, sizeof real_TransmitFile);
    LPFN_TRANSMITFILE wrapper = w_TransmitFile;
    memcpy(out, &wrapper, sizeof wrapper);
  }
  return rc;
}

static BOOL WINAPI w_GetQueuedCompletionStatusEx(HANDLE port,
                                                 OVERLAPPED_ENTRY *entries,
                                                 ULONG max, ULONG *removed,
                                                 DWORD ms, BOOL alertable) {
  int what = decide(SITE_GetQueuedCompletionStatusEx);
  if (what > 0) {
    if (removed) *removed = 0;
    WIN_FAIL(what, FALSE);
  }
  return real_GetQueuedCompletionStatusEx(port, entries, max, removed, ms,
                                          alertable);
}

static BOOL WINAPI w_PostQueuedCompletionStatus(HANDLE port, DWORD bytes,
                                                ULONG_PTR key, OVERLAPPED *ov) {
  int what = decide(SITE_PostQueuedCompletionStatus);
  if (what > 0) WIN_FAIL(what, FALSE);
  return real_PostQueuedCompletionStatus(port, bytes, key, ov);
}

static HANDLE WINAPI w_CreateIoCompletionPort(HANDLE h, HANDLE port,
                                              ULONG_PTR key, DWORD threads) {
  int what = decide(SITE_CreateIoCompletionPort);
  if (what > 0) WIN_FAIL(what, NULL);
  return real_CreateIoCompletionPort(h, port, key, threads);
}

static BOOL WINAPI w_ReadFile(HANDLE h, void *buf, DWORD len, DWORD *got,
                              OVERLAPPED *ov) {
  int what = decide(SITE_ReadFile);
  if (what > 0) WIN_FAIL(what, FALSE);
  return real_ReadFile(h, buf, len, got, ov);
}

static BOOL WINAPI w_WriteFile(HANDLE h, const void *buf, DWORD len,
                               DWORD *wrote, OVERLAPPED *ov) {
  int what = decide(SITE_WriteFile);
  if (what > 0) WIN_FAIL(what, FALSE);
  return real_WriteFile(h, buf, len, wrote, ov);
}

/* ---- patching the import address table ---------------------------------- */

typedef struct hook {
  const char *name; /* as imported */
  void *wrapper;
  void **real;
} hook_t;

#define HOOK(name) \
  { #name, (void *)w_##name, (void **)&real_##name }
static const hook_t hooks[] = {
    HOOK(select),
    HOOK(WSAPoll),
    HOOK(send),
    HOOK(recv),
    HOOK(WSASend),
    HOOK(WSARecv),
    HOOK(accept),
    HOOK(connect),
    HOOK(socket),
    HOOK(WSASocketW),
    HOOK(closesocket),
    HOOK(ioctlsocket),
    HOOK(WSAIoctl),
    HOOK(GetQueuedCompletionStatusEx),
    HOOK(PostQueuedCompletionStatus),
    HOOK(CreateIoCompletionPort),
    HOOK(ReadFile),
    HOOK(WriteFile),
};
#undef HOOK

static const hook_t *hook_for(const char *name) {
  for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
    if (strcmp(hooks[i].name, name) == 0) return &hooks[i];
  return NULL;
}

static bool set_entry(ULONG_PTR *slot, ULONG_PTR value) {
  DWORD old;
  if (!VirtualProtect(slot, sizeof *slot, PAGE_READWRITE, &old)) return false;
  *slot = value;
  DWORD ignored;
  VirtualProtect(slot, sizeof *slot, old, &ignored);
  return true;
}

/* Replace the IAT entries of `mod` that `hooks` names; how many were. */
static int patch(HMODULE mod) {
  BYTE *base = (BYTE *)mod;
  const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
  if (dos->e_magic != IMAGE_DOS_SIGNATURE) return 0;
  const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + dos->e_lfanew);
  if (nt->Signature != IMAGE_NT_SIGNATURE) return 0;
  const IMAGE_DATA_DIRECTORY *dir =
      &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_IMPORT];
  if (!dir->VirtualAddress) return 0;
  int patched = 0;
  for (const IMAGE_IMPORT_DESCRIPTOR *imp =
           (const IMAGE_IMPORT_DESCRIPTOR *)(base + dir->VirtualAddress);
       imp->Name; imp++) {
    /* The names are in the lookup table (OriginalFirstThunk); the IAT
     * (FirstThunk) holds the addresses the loader bound. */
    if (!imp->OriginalFirstThunk) continue;
    const IMAGE_THUNK_DATA *names =
        (const IMAGE_THUNK_DATA *)(base + imp->OriginalFirstThunk);
    IMAGE_THUNK_DATA *iat = (IMAGE_THUNK_DATA *)(base + imp->FirstThunk);
    for (; names->u1.AddressOfData; names++, iat++) {
      if (IMAGE_SNAP_BY_ORDINAL(names->u1.Ordinal)) continue;
      const IMAGE_IMPORT_BY_NAME *by =
          (const IMAGE_IMPORT_BY_NAME *)(base + names->u1.AddressOfData);
      const hook_t *h = hook_for((const char *)by->Name);
      if (!h) continue;
      if (iat->u1.Function == (ULONG_PTR)h->wrapper) {
        patched++; /* already */
        continue;
      }
      *h->real = (void *)iat->u1.Function;
      if (set_entry(&iat->u1.Function, (ULONG_PTR)h->wrapper)) patched++;
    }
  }
  return patched;
}

static INIT_ONCE once = INIT_ONCE_STATIC_INIT;
static int patched_count;

static BOOL CALLBACK install(INIT_ONCE *o, void *arg, void **ctx) {
  (void)o;
  (void)arg;
  (void)ctx;
  /* The module that holds libtaxi: its DLL, or else (a static build) the
   * module of taxi_reactor_create, this program. */
  HMODULE mod = GetModuleHandleW(L"libtaxi-0.dll");
  if (!mod &&
      !GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                              GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          (LPCWSTR)(void *)&taxi_reactor_create, &mod))
    mod = NULL;
  if (mod) patched_count = patch(mod);
  return TRUE;
}

/* 0 once the library's imports are patched, else -ENOSYS. */
static int fault_iat_install(void) {
  InitOnceExecuteOnce(&once, install, NULL, NULL);
  /* Every wrapper needs its original: a library that imports only some of
   * them (a build without a backend) still works with the others. */
  return patched_count > 0 && real_closesocket ? 0 : -ENOSYS;
}

/* ---- the control calls of fault.h ---------------------------------------- */

int taxi_fault_arm(const char *spec) {
  if (fault_iat_install() < 0) return -ENOSYS;
  return fault_rules_arm(&set, spec) < 0 ? -EINVAL : 0;
}

unsigned long taxi_fault_calls(const char *name) {
  return fault_rules_calls(&set, name);
}

unsigned long taxi_fault_injected(const char *name) {
  return fault_rules_injected(&set, name);
}

bool fault_available(void) { return fault_iat_install() == 0; }

int fault_arm(const char *spec) { return taxi_fault_arm(spec); }

unsigned long fault_calls(const char *name) { return taxi_fault_calls(name); }

unsigned long fault_injected(const char *name) {
  return taxi_fault_injected(name);
}

const char *fault_unavailable_reason(void) {
  return "libtaxi's import table could not be patched";
}

/* Nothing to preload: patch now, before the tests create anything, so that
 * the sockets libtaxi makes are seen made. */
void fault_reexec_preloaded(int argc, char **argv) {
  (void)argc;
  (void)argv;
  (void)fault_iat_install();
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int taxi_tests_fault_iat_absent;
#endif /* _WIN32 */
