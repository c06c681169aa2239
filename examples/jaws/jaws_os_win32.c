/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_os_win32.c - jaws_os.h on Windows: files are
 * CreateFileW handles opened overlapped, read at an offset with an event
 * of the read's own and sent with TransmitFile from an offset given the
 * same way; paths are UTF-8 with '/' (what vfs.c compares), resolved by
 * opening them and asking the handle for its final path, so a symbolic
 * link or junction is resolved as the system follows it; sockets are
 * Winsock's.  (jaws_os_posix.c is the other side.)
 */
#include "jaws_os.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <winsock2.h>
#include <ws2tcpip.h>
#include <mswsock.h>
#include <windows.h>

/* Wide path buffers: as long as vfs.c's paths (PATH_CAP bytes). */
#define WPATH_CAP 4096

int64_t jaws_now_ms(void) { return (int64_t)GetTickCount64(); }

int64_t jaws_wall_s(void) { return (int64_t)time(NULL); }

/* 100 ns ticks since 1601 (a FILETIME, a LARGE_INTEGER of the file
 * information calls) as nanoseconds since 1970, saturated. */
static int64_t ns_of_ticks(uint64_t ticks) {
  int64_t since_1970;
  if (ticks > (uint64_t)INT64_MAX) return INT64_MAX;
  since_1970 = (int64_t)ticks - INT64_C(116444736000000000);
  if (since_1970 > INT64_MAX / 100) return INT64_MAX;
  if (since_1970 < INT64_MIN / 100) return INT64_MIN;
  return since_1970 * 100;
}

int64_t jaws_wall_ns(void) {
  FILETIME ft;
  /* The clock the file system stamps times from (Windows 7 has no
   * precise one: a tick of 15.6 ms is fine for what vfs.c asks). */
  GetSystemTimeAsFileTime(&ft);
  return ns_of_ticks((uint64_t)ft.dwHighDateTime << 32 | ft.dwLowDateTime);
}

static int os_status(DWORD err) {
  switch (err) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_DIRECTORY:
    case ERROR_FILENAME_EXCED_RANGE:
    case ERROR_INVALID_DRIVE:
    case ERROR_BAD_NETPATH:
    case ERROR_NOT_READY:
      return JAWS_OS_NOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_CANT_ACCESS_FILE:      /* a reparse point it cannot follow */
    case ERROR_CANT_RESOLVE_FILENAME: /* too many reparse points: a loop */
      return JAWS_OS_DENIED;
    default:
      return JAWS_OS_ERROR;
  }
}

/* Is the last component of path a DOS device name (CON, NUL, COM1, ...,
 * with or without an extension: "con.txt" is the console to Win32 too)?
 * Opening one opens the device, or fails in ways no missing file does. */
static bool is_device_name(const char *path) {
  static const char *const names[] = {"CON", "PRN",    "AUX",
                                      "NUL", "CONIN$", "CONOUT$"};
  const char *last = path;
  for (const char *c = path; *c; c++)
    if (*c == '/' || *c == '\\') last = c + 1;
  size_t len = strcspn(last, ".:");
  while (len > 0 && last[len - 1] == ' ') len--;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (len == strlen(names[i]) && _strnicmp(last, names[i], len) == 0)
      return true;
  return len == 4 &&
         (_strnicmp(last, "COM", 3) == 0 || _strnicmp(last, "LPT", 3) == 0) &&
         last[3] >= '0' && last[3] <= '9';
}

/* path (UTF-8, '/' or '\\' separators) as a wide path with '\\' into
 * out[WPATH_CAP]; 0 or the error that says why it cannot be one.  A ':'
 * is allowed only after a drive letter: anywhere else it names an
 * alternate data stream ("index.html::$DATA"), another view of a file
 * than the one the server means to give. */
static DWORD to_wide(const char *path, wchar_t *out) {
  const char *name = path;
  if ((path[0] == '\\' || path[0] == '/') &&
      (path[1] == '\\' || path[1] == '/') && path[2] == '?' &&
      (path[3] == '\\' || path[3] == '/'))
    name += 4; /* a "\\?\" path: its drive letter comes after */
  for (const char *c = name; *c; c++)
    if (*c == ':' && c != name + 1) return ERROR_INVALID_NAME;
  if (is_device_name(name)) return ERROR_FILE_NOT_FOUND;
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, out,
                              WPATH_CAP - 1);
  if (n == 0)
    return GetLastError() == ERROR_INSUFFICIENT_BUFFER
               ? ERROR_FILENAME_EXCED_RANGE
               : ERROR_INVALID_NAME;
  for (wchar_t *c = out; *c; c++)
    if (*c == L'/') *c = L'\\';
  /* "C:" alone is the current directory of drive C, not its root. */
  if (n == 3 && out[1] == L':') out[2] = L'\\', out[3] = L'\0';
  return 0;
}

/* CreateFileW for reading attributes or data, sharing everything: a file
 * being sent may be written, deleted or moved aside and another put in
 * its place, the handle reading on (Windows refuses to rename a file over
 * an open one, even one shared so).  Directories too
 * (FILE_FLAG_BACKUP_SEMANTICS).  Only disk files: a device name ("CON",
 * "NUL") in the path opens a device, which is no file to serve. */
static HANDLE open_path(const char *path, DWORD access, DWORD flags,
                        DWORD *err) {
  wchar_t w[WPATH_CAP];
  if ((*err = to_wide(path, w)) != 0) return INVALID_HANDLE_VALUE;
  HANDLE h = CreateFileW(
      w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
      OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS | flags, NULL);
  if (h == INVALID_HANDLE_VALUE) {
    *err = GetLastError();
    return h;
  }
  if (GetFileType(h) != FILE_TYPE_DISK) {
    CloseHandle(h);
    *err = ERROR_FILE_NOT_FOUND;
    return INVALID_HANDLE_VALUE;
  }
  return h;
}

int jaws_resolve(const char *path, char *out, size_t cap) {
  wchar_t w[WPATH_CAP];
  DWORD err;
  /* The path of the file actually opened, every reparse point (symbolic
   * link, junction) followed: what the root check in vfs.c compares. */
  HANDLE h = open_path(path, FILE_READ_ATTRIBUTES, 0, &err);
  if (h == INVALID_HANDLE_VALUE) return os_status(err);
  DWORD n = GetFinalPathNameByHandleW(h, w, WPATH_CAP,
                                      FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
  err = GetLastError();
  CloseHandle(h);
  if (n == 0) return os_status(err);
  if (n >= WPATH_CAP) return JAWS_OS_NOENT;
  const wchar_t *p = w;
  if (wcsncmp(w, L"\\\\?\\UNC\\", 8) == 0) {
    p = w + 6; /* \\?\UNC\server\share -> \\server\share */
    w[6] = L'\\';
  } else if (wcsncmp(w, L"\\\\?\\", 4) == 0) {
    p = w + 4; /* \\?\C:\dir -> C:\dir */
  }
  if (WideCharToMultiByte(CP_UTF8, 0, p, -1, out,
                          (int)(cap < INT_MAX ? cap : INT_MAX), NULL,
                          NULL) == 0)
    return JAWS_OS_NOENT;
  /* vfs.c compares with '/' separators; a drive's root loses its trailing
   * one ("C:/" -> "C:") so that "C:" + "/x" is below it. */
  for (char *c = out; *c; c++)
    if (*c == '\\') *c = '/';
  size_t len = strlen(out);
  if (len > 1 && out[len - 1] == '/') out[len - 1] = '\0';
  return JAWS_OS_OK;
}

/* What open handle h is into st, its attributes into *attributes: 0, or
 * the error. */
static DWORD stat_handle(HANDLE h, struct jaws_stat *st, DWORD *attributes) {
  BY_HANDLE_FILE_INFORMATION bi;
  FILE_BASIC_INFO basic;
  if (!GetFileInformationByHandle(h, &bi)) {
    DWORD err = GetLastError();
    return err ? err : ERROR_GEN_FAILURE; /* 0 would say it worked */
  }
  uint64_t ticks = (uint64_t)bi.ftLastWriteTime.dwHighDateTime << 32 |
                   bi.ftLastWriteTime.dwLowDateTime;
  *attributes = bi.dwFileAttributes;
  st->kind = (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? JAWS_DIRECTORY
                                                              : JAWS_REGULAR;
  st->size = (uint64_t)bi.nFileSizeHigh << 32 | bi.nFileSizeLow;
  st->dev = bi.dwVolumeSerialNumber;
  st->ino = (uint64_t)bi.nFileIndexHigh << 32 | bi.nFileIndexLow;
  /* 100 ns ticks since 1601 to seconds since 1970. */
  st->mtime = (int64_t)(ticks / 10000000u) - INT64_C(11644473600);
  st->mtime_ns = ns_of_ticks(ticks);
  /* The change time (of the contents or the attributes, POSIX's ctime)
   * is only in FILE_BASIC_INFO.  A file system that keeps none leaves
   * the write time alone to compare. */
  if (GetFileInformationByHandleEx(h, FileBasicInfo, &basic, sizeof basic) &&
      basic.ChangeTime.QuadPart > 0)
    st->ctime_ns = ns_of_ticks((uint64_t)basic.ChangeTime.QuadPart);
  else
    st->ctime_ns = st->mtime_ns;
  return 0;
}

int jaws_stat(const char *path, struct jaws_stat *st) {
  DWORD err, attributes;
  HANDLE h = open_path(path, FILE_READ_ATTRIBUTES, 0, &err);
  if (h == INVALID_HANDLE_VALUE) return os_status(err);
  err = stat_handle(h, st, &attributes);
  CloseHandle(h);
  return err ? os_status(err) : JAWS_OS_OK;
}

int jaws_open(const char *path, taxi_handle_t *out, struct jaws_stat *st) {
  DWORD err, attributes;
  /* FILE_FLAG_OPEN_REPARSE_POINT: the last component itself, not what a
   * link names (O_NOFOLLOW); a reparse point is refused below.
   * FILE_FLAG_OVERLAPPED: reads at an offset that share no file pointer,
   * which the IOCP Proactor's ReadFile and TransmitFile need of a handle
   * several connections send from at once. */
  HANDLE h = open_path(path, GENERIC_READ,
                       FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_OVERLAPPED |
                           FILE_FLAG_SEQUENTIAL_SCAN,
                       &err);
  if (h == INVALID_HANDLE_VALUE) return os_status(err);
  if ((err = stat_handle(h, st, &attributes)) != 0) {
    CloseHandle(h);
    return os_status(err);
  }
  if (attributes & FILE_ATTRIBUTE_REPARSE_POINT) {
    CloseHandle(h);
    return JAWS_OS_DENIED; /* as ELOOP from O_NOFOLLOW */
  }
  *out = (taxi_handle_t)(uintptr_t)h;
  return JAWS_OS_OK;
}

void jaws_close(taxi_handle_t f) {
  if (f != TAXI_INVALID_HANDLE) CloseHandle((HANDLE)(uintptr_t)f);
}

int jaws_read_at(taxi_handle_t f, void *buf, size_t len, uint64_t off) {
  HANDLE h = (HANDLE)(uintptr_t)f;
  /* The handle is overlapped: each read waits on an event of its own, not
   * on the handle, which another thread's read may signal. */
  HANDLE ev = CreateEventW(NULL, TRUE, FALSE, NULL);
  char *p = buf;
  int rc = ev ? 0 : -1;
  while (rc == 0 && len > 0) {
    OVERLAPPED ov;
    DWORD want = len > (1u << 30) ? (1u << 30) : (DWORD)len, got = 0;
    memset(&ov, 0, sizeof ov);
    ov.Offset = (DWORD)(off & 0xffffffffu);
    ov.OffsetHigh = (DWORD)(off >> 32);
    ov.hEvent = ev;
    if ((!ReadFile(h, p, want, NULL, &ov) &&
         GetLastError() != ERROR_IO_PENDING) ||
        !GetOverlappedResult(h, &ov, &got, TRUE) || got == 0) {
      rc = -1; /* an error, or the file shrank */
      break;
    }
    p += got;
    len -= got;
    off += got;
  }
  if (ev) CloseHandle(ev);
  return rc;
}

/* Make s blocking, with sends that give up after send_timeout_ms. */
static int sock_blocking(taxi_handle_t s, unsigned send_timeout_ms) {
  u_long off = 0;
  DWORD ms = send_timeout_ms;
  if (ioctlsocket((SOCKET)s, FIONBIO, &off) != 0) return -1;
  return setsockopt((SOCKET)s, SOL_SOCKET, SO_SNDTIMEO, (const char *)&ms,
                    sizeof ms) == 0
             ? 0
             : -1;
}

int jaws_sock_wait(taxi_handle_t s, int timeout_ms) {
  if (s == TAXI_INVALID_HANDLE) { /* a nap: WSAPoll wants a socket */
    Sleep(timeout_ms > 0 ? (DWORD)timeout_ms : 0);
    return 0;
  }
  WSAPOLLFD one = {.fd = (SOCKET)s, .events = POLLRDNORM};
  int rc = WSAPoll(&one, 1, timeout_ms);
  if (rc == SOCKET_ERROR) return WSAGetLastError() == WSAEINTR ? 0 : -1;
  return rc > 0 ? 1 : 0;
}

long jaws_sock_recv(taxi_handle_t s, void *buf, size_t cap) {
  for (;;) {
    int n = recv((SOCKET)s, buf, cap > INT_MAX ? INT_MAX : (int)cap, 0);
    if (n == SOCKET_ERROR && WSAGetLastError() == WSAEINTR) continue;
    return n == SOCKET_ERROR ? -1 : (long)n;
  }
}

int jaws_sock_send(taxi_handle_t s, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    int n = send((SOCKET)s, p, len > INT_MAX ? INT_MAX : (int)len, 0);
    if (n == SOCKET_ERROR && WSAGetLastError() == WSAEINTR) continue;
    if (n <= 0) return -1; /* an error, or the send timeout */
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* WSASend's and TransmitFile's lengths are DWORDs: stay far below. */
#define IO_MAX ((size_t)1 << 30)
/* A blocking WSASend waits until the whole buffer is taken, and
 * SO_SNDTIMEO ends the connection if that takes longer: a body from
 * memory (up to --memory-max, 8 MiB) goes in pieces of this much, so
 * that a client reading slowly has each piece's send timeout, as with
 * TransmitFile's first piece below, not the whole body's. */
#define SEND_PIECE ((size_t)256 * 1024)

int jaws_sock_send2(taxi_handle_t s, const void *a, size_t alen, const void *b,
                    size_t blen) {
  const char *p[2] = {a, b};
  size_t left[2] = {alen, blen};
  while (left[0] + left[1] > 0) {
    WSABUF wb[2];
    DWORD n = 0, sent = 0;
    for (int i = 0; i < 2; i++)
      if (left[i] > 0) {
        wb[n].buf = (char *)p[i];
        wb[n].len = (ULONG)(left[i] > SEND_PIECE ? SEND_PIECE : left[i]);
        n++;
      }
    if (WSASend((SOCKET)s, wb, n, &sent, 0, NULL, NULL) != 0) {
      if (WSAGetLastError() == WSAEINTR) continue;
      return -1; /* an error, or the send timeout (WSAETIMEDOUT) */
    }
    if (sent == 0) return -1;
    for (int i = 0; i < 2; i++) {
      size_t d = sent < left[i] ? sent : left[i];
      p[i] += d;
      left[i] -= d;
      sent -= (DWORD)d;
    }
  }
  return 0;
}

/* A blocking socket's send that does not wait: the socket non-blocking
 * for the call (Winsock has no MSG_DONTWAIT). */
int64_t jaws_sock_send2_now(taxi_handle_t s, const void *a, size_t alen,
                            const void *b, size_t blen) {
  const char *p[2] = {a, b};
  size_t left[2] = {alen, blen};
  u_long on = 1, off = 0;
  int64_t sent = 0;
  if (ioctlsocket((SOCKET)s, FIONBIO, &on) != 0) return -1;
  while (left[0] + left[1] > 0) {
    WSABUF wb[2];
    DWORD n = 0, went = 0;
    for (int i = 0; i < 2; i++)
      if (left[i] > 0) {
        wb[n].buf = (char *)p[i];
        wb[n].len = (ULONG)(left[i] > IO_MAX ? IO_MAX : left[i]);
        n++;
      }
    if (WSASend((SOCKET)s, wb, n, &went, 0, NULL, NULL) != 0) {
      int err = WSAGetLastError();
      if (err == WSAEINTR) continue;
      if (err != WSAEWOULDBLOCK) sent = -1;
      break; /* an error, or full */
    }
    if (went == 0) break;
    sent += went;
    for (int i = 0; i < 2; i++) {
      size_t d = went < left[i] ? went : left[i];
      p[i] += d;
      left[i] -= d;
      went -= (DWORD)d;
    }
  }
  if (ioctlsocket((SOCKET)s, FIONBIO, &off) != 0) return -1;
  return sent;
}

int64_t jaws_sock_send_now(taxi_handle_t s, const void *head, size_t head_len,
                           const void *data, taxi_handle_t f, uint64_t off,
                           uint64_t len) {
  /* TransmitFile cannot stop where the socket is full: a file is copied. */
  if (data || len == 0)
    return jaws_sock_send2_now(s, head, head_len, data, (size_t)len);
  int64_t sent = jaws_sock_send2_now(s, head, head_len, NULL, 0);
  if (sent < (int64_t)head_len) return sent;
  int64_t body = jaws_send_copy_now(s, f, off, len);
  return body < 0 ? -1 : sent + body;
}

/* TransmitFile, looked up through WSAIoctl as Microsoft asks of its
 * callers (another provider than its own may supply it); NULL where the
 * socket has none. */
static LPFN_TRANSMITFILE transmit_file;
static INIT_ONCE transmit_once = INIT_ONCE_STATIC_INIT;

static BOOL CALLBACK load_transmit_file(PINIT_ONCE once, void *s, void **c) {
  GUID guid = WSAID_TRANSMITFILE;
  DWORD n = 0;
  (void)once;
  (void)c;
  if (WSAIoctl((SOCKET)(uintptr_t)s, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid,
               sizeof guid, &transmit_file, sizeof transmit_file, &n, NULL,
               NULL) != 0)
    transmit_file = NULL;
  return TRUE;
}

/* The first piece of a file TransmitFile is given, and the most it takes
 * in one call (2^31 - 2 bytes). */
#define FIRST_PIECE ((DWORD)256 * 1024)
#define MAX_PIECE ((DWORD)0x7ffffffe)

/* One TransmitFile of head[head_len] and want bytes of f from off, given
 * up after ms (0: never): 1 all sent, 0 TransmitFile cannot send this
 * (nothing went), -1 error, timeout or a file that shrank.
 *
 * The file handle is overlapped and shared by the threads sending from
 * it, so it has no file pointer to start from: the offset goes in an
 * OVERLAPPED, which makes the call overlapped even on this blocking
 * socket (it may return WSA_IO_PENDING) and leaves it outside
 * SO_SNDTIMEO: the wait for its event is what gives up. */
static int transmit_piece(SOCKET s, HANDLE ev, const void *head,
                          size_t head_len, HANDLE f, uint64_t off, DWORD want,
                          DWORD ms) {
  OVERLAPPED ov;
  TRANSMIT_FILE_BUFFERS tfb;
  DWORD sent = 0, flags = 0;
  memset(&ov, 0, sizeof ov);
  memset(&tfb, 0, sizeof tfb);
  ov.Offset = (DWORD)(off & 0xffffffffu);
  ov.OffsetHigh = (DWORD)(off >> 32);
  /* The low bit set: no completion packet, should s be bound to a port. */
  ov.hEvent = (HANDLE)((uintptr_t)ev | 1);
  tfb.Head = (void *)head;
  tfb.HeadLength = (DWORD)head_len;
  ResetEvent(ev);
  if (!transmit_file(s, f, want, 0, &ov, head_len ? &tfb : NULL, 0)) {
    int err = WSAGetLastError();
    if (err == WSAEOPNOTSUPP) return 0;
    if (err != WSA_IO_PENDING) return -1;
  }
  if (WaitForSingleObject(ev, ms ? ms : INFINITE) != WAIT_OBJECT_0) {
    /* The peer took too little for too long.  The call must end before
     * its OVERLAPPED does; a cancelled one ends at once. */
    (void)CancelIoEx((HANDLE)s, &ov);
    (void)WaitForSingleObject(ev, INFINITE);
    return -1;
  }
  if (!WSAGetOverlappedResult(s, &ov, &sent, FALSE, &flags)) return -1;
  return sent == head_len + want ? 1 : -1;
}

int jaws_sock_send_file(taxi_handle_t s, const void *head, size_t head_len,
                        taxi_handle_t f, uint64_t off, uint64_t len) {
  DWORD ms = 0, piece = FIRST_PIECE;
  int optlen = sizeof ms, rc;
  HANDLE ev = NULL;
  (void)InitOnceExecuteOnce(&transmit_once, load_transmit_file,
                            (void *)(uintptr_t)s, NULL);
  /* (A length of 0 would send the whole file.) */
  if (transmit_file && len > 0 && head_len <= IO_MAX &&
      getsockopt((SOCKET)s, SOL_SOCKET, SO_SNDTIMEO, (char *)&ms, &optlen) == 0)
    ev = CreateEventW(NULL, TRUE, FALSE, NULL);
  rc = ev ? 1 : 0;
  while (rc == 1 && len > 0) {
    /* Each piece has the send timeout to go.  A piece doubles while the
     * peer takes one in under a quarter of that: a large file goes in few
     * calls, and a peer that keeps reading is not cut off. */
    DWORD want = len < piece ? (DWORD)len : piece;
    int64_t t0 = jaws_now_ms();
    rc = transmit_piece((SOCKET)s, ev, head, head_len, (HANDLE)(uintptr_t)f,
                        off, want, ms);
    if (rc != 1) break;
    head_len = 0;
    off += want;
    len -= want;
    if (ms == 0 || (jaws_now_ms() - t0) * 4 < (int64_t)ms)
      piece = piece > MAX_PIECE / 2 ? MAX_PIECE : piece * 2;
  }
  if (ev) CloseHandle(ev);
  if (rc != 0) return rc == 1 ? 0 : -1;
  /* No TransmitFile, or one that cannot send from this file: copy, from
   * where it stopped. */
  if (jaws_sock_send(s, head, head_len) != 0) return -1;
  return jaws_send_copy(s, f, off, len);
}

/* Windows applies no receive timeout to accept(), and a blocking receive
 * that times out leaves the socket in an undefined state (SO_RCVTIMEO in
 * the Winsock documentation): the pool polls before each. */
int jaws_sock_accept_waits(taxi_handle_t l, unsigned send_timeout_ms,
                           int wait_ms) {
  (void)l;
  (void)send_timeout_ms;
  (void)wait_ms;
  return 0;
}

int jaws_sock_accept(taxi_handle_t l, bool prepared, taxi_handle_t *out,
                     char *peer, size_t cap, unsigned send_timeout_ms,
                     int wait_ms) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  BOOL on = TRUE;
  (void)prepared;
  (void)wait_ms;
  SOCKET s = accept((SOCKET)l, (struct sockaddr *)&ss, &len);
  if (s == INVALID_SOCKET) {
    int err = WSAGetLastError();
    return err == WSAEWOULDBLOCK || err == WSAEINTR || err == WSAECONNRESET
               ? 0
               : -1;
  }
  /* cap 0: no one reads the address (no access log), and formatting it
   * costs a few percent of a small request's CPU. */
  if (cap > 0 && getnameinfo((struct sockaddr *)&ss, len, peer, (DWORD)cap,
                             NULL, 0, NI_NUMERICHOST) != 0)
    snprintf(peer, cap, "-");
  (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *)&on, sizeof on);
  if (sock_blocking((taxi_handle_t)s, send_timeout_ms) != 0) {
    closesocket(s);
    return -1;
  }
  *out = (taxi_handle_t)s;
  return 1;
}

int jaws_sock_defer_accept(taxi_handle_t l, unsigned secs) {
  /* Winsock's SO_CONDITIONAL_ACCEPT decides whether to accept, not when. */
  (void)l;
  (void)secs;
  return 0;
}

unsigned jaws_sock_backlog(taxi_handle_t l) {
  (void)l;
  return 0; /* Winsock does not say */
}

long jaws_sock_recv_timed(taxi_handle_t s, void *buf, size_t cap, int wait_ms) {
  /* jaws_sock_wait only naps on no socket: that is an error here. */
  if (s == TAXI_INVALID_HANDLE) return -1;
  int rc = jaws_sock_wait(s, wait_ms);
  if (rc <= 0) return rc < 0 ? -1 : JAWS_SOCK_TIMEOUT;
  return jaws_sock_recv(s, buf, cap);
}

int jaws_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  return pthread_create(t, NULL, fn, arg); /* no signal masks to set */
}

unsigned jaws_cpu_count(void) {
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  return si.dwNumberOfProcessors > 0 ? (unsigned)si.dwNumberOfProcessors : 1u;
}
