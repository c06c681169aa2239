/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/jaws_os.h - the operating-system calls the server needs
 * beyond taxi and examples/echo_common.h: files (resolve, stat, open,
 * read), blocking socket I/O for the thread strategies, and a monotonic
 * clock, a thread that takes no signals.  jaws_os_posix.c and
 * jaws_os_win32.c (one of them is built) are the only server files that
 * include system headers; jaws_os.c holds what they share.  A file
 * handle is a file descriptor on POSIX, an overlapped CreateFileW handle
 * on Windows: what taxi_stream_sendfile takes there.
 */
#ifndef JAWS_OS_H
#define JAWS_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>

#include <taxi/taxi.h>

enum jaws_kind { JAWS_OTHER, JAWS_REGULAR, JAWS_DIRECTORY };

struct jaws_stat {
  enum jaws_kind kind;
  uint64_t size, dev, ino;
  int64_t mtime; /* seconds since the epoch */
  /* Nanoseconds since the epoch, as finely as the system keeps them: the
   * last change of the contents (mtime), and of the contents or the
   * attributes (ctime; Windows: ChangeTime).  A file rewritten in place
   * within a second keeps its mtime in seconds; its ctime moves however
   * its mtime is set back. */
  int64_t mtime_ns, ctime_ns;
};

/* Outcomes of the file calls. */
#define JAWS_OS_OK 0
#define JAWS_OS_NOENT (-1)  /* missing, or a component not a directory */
#define JAWS_OS_DENIED (-2) /* permission denied, a loop */
#define JAWS_OS_ERROR (-3)  /* anything else (out of descriptors, I/O) */

/* Milliseconds of a monotonic clock. */
int64_t jaws_now_ms(void);
/* Seconds since the epoch, UTC. */
int64_t jaws_wall_s(void);
/* Nanoseconds since the epoch, UTC (the clock file times are taken from). */
int64_t jaws_wall_ns(void);

/* The canonical absolute path of `path` (symbolic links, "." and ".."
 * resolved) into out[cap], with '/' separators on every system (Windows:
 * "C:/dir/file", no "\\?\" prefix, a drive's root as "C:"). */
int jaws_resolve(const char *path, char *out, size_t cap);
/* stat(2), following links. */
int jaws_stat(const char *path, struct jaws_stat *st);
/* Open a file for reading, not following a link (a reparse point) in its
 * last component, and stat the open file. */
int jaws_open(const char *path, taxi_handle_t *out, struct jaws_stat *st);
void jaws_close(taxi_handle_t f);
/* Read exactly len bytes at off; 0, or -1 (error or the file shrank). */
int jaws_read_at(taxi_handle_t f, void *buf, size_t len, uint64_t off);

/* Blocking sockets (the thread strategies). */
/* Wait up to timeout_ms for s to be readable: 1, 0 (timed out), -1.
 * With TAXI_INVALID_HANDLE, just wait timeout_ms and return 0. */
int jaws_sock_wait(taxi_handle_t s, int timeout_ms);
/* One receive: bytes (> 0), 0 at end of stream, -1 on error. */
long jaws_sock_recv(taxi_handle_t s, void *buf, size_t cap);
/* Send everything: 0, or -1 (error, send timeout). */
int jaws_sock_send(taxi_handle_t s, const void *buf, size_t len);
/* Send head[head_len], then len bytes of file f from off, as few segments
 * and copies as the system allows: Linux sendfile(2) after the head, the
 * socket corked meanwhile (full segments, the head with the file's first
 * bytes); FreeBSD and macOS sendfile(2) with the head in the call;
 * Windows TransmitFile with the head in it (the file's offset in an
 * OVERLAPPED, the wait for it given up after the socket's send timeout).
 * Where the system has no such call, or it cannot send from this file,
 * the file is read and sent.  0, or -1 (error, send timeout, a file that
 * shrank). */
int jaws_sock_send_file(taxi_handle_t s, const void *head, size_t head_len,
                        taxi_handle_t f, uint64_t off, uint64_t len);
/* Send len bytes of file f from off by reading and sending them
 * (jaws_sock_send_file's way where the system has no call for it): 0 or
 * -1. */
int jaws_send_copy(taxi_handle_t s, taxi_handle_t f, uint64_t off,
                   uint64_t len);
/* Send a[alen] then b[blen] in one gathering call (POSIX sendmsg,
 * Windows WSASend; one segment for a small response), repeated for what a
 * partial send left: 0, or -1 (error, send timeout). */
int jaws_sock_send2(taxi_handle_t s, const void *a, size_t alen, const void *b,
                    size_t blen);

/* Sends that never wait for room (the adaptive strategy's pool, which
 * hands a connection whose socket is full to its Proactor).
 *
 * jaws_sock_send2_now: a[alen] then b[blen], gathered (as
 * jaws_sock_send2), as far as the socket takes them now.
 *
 * jaws_sock_send_now: head[head_len], then the body: data[len] where data
 * is not NULL, else len bytes of file f from off (Linux: sendfile(2),
 * the socket non-blocking meanwhile; elsewhere the file is read and sent
 * a piece at a time, jaws_send_copy_now).
 *
 * Both return the bytes that went (fewer than asked: the socket is full),
 * or -1 on an error (a file that shrank too). */
int64_t jaws_sock_send2_now(taxi_handle_t s, const void *a, size_t alen,
                            const void *b, size_t blen);
int64_t jaws_sock_send_now(taxi_handle_t s, const void *head, size_t head_len,
                           const void *data, taxi_handle_t f, uint64_t off,
                           uint64_t len);
int64_t jaws_send_copy_now(taxi_handle_t s, taxi_handle_t f, uint64_t off,
                           uint64_t len);

/* Accepts for the thread strategies, in as few system calls as the system
 * allows.
 *
 * jaws_sock_accept_waits: give the (non-blocking) listener l what its
 * connections need, where they inherit it, and make its accepts wait up
 * to wait_ms themselves, so a pool thread needs no poll before each: 1
 * done (Linux: a blocking listener with a receive timeout, TCP_NODELAY and
 * the send timeout), 0 not possible here (the listener is left as it was;
 * the caller waits with jaws_sock_wait, then accepts).
 *
 * jaws_sock_accept: accept one connection (`prepared`: from a listener
 * jaws_sock_accept_waits said 1 to) as a blocking socket, not inherited
 * by child processes, TCP_NODELAY, sends giving up after send_timeout_ms
 * and (where jaws_sock_recv_timed relies on it) receives after wait_ms;
 * its peer's numeric address into peer[cap] ("-" if unknown; cap 0: not
 * asked, peer untouched).  1
 * accepted, 0 none waiting (or one that vanished), -1 error.  A socket it
 * cannot set up is closed again. */
int jaws_sock_accept_waits(taxi_handle_t l, unsigned send_timeout_ms,
                           int wait_ms);
int jaws_sock_accept(taxi_handle_t l, bool prepared, taxi_handle_t *out,
                     char *peer, size_t cap, unsigned send_timeout_ms,
                     int wait_ms);
/* Have listener l's accept queue take a connection only once its first
 * bytes have come (or about secs seconds after its handshake; secs 0
 * turns it off): a thread woken to accept then finds the request there,
 * where it would otherwise read nothing and wait again.  1 done, 0 not
 * possible here (Linux's TCP_DEFER_ACCEPT only), -1 refused. */
int jaws_sock_defer_accept(taxi_handle_t l, unsigned secs);
/* Connections waiting in listener l's accept queue (Linux: TCP_INFO of a
 * listening socket); 0 where the system does not say. */
unsigned jaws_sock_backlog(taxi_handle_t l);
/* A receive on a socket from jaws_sock_accept that waits at most the
 * wait_ms given there, or not at all for wait_ms 0: bytes (> 0), 0 at end
 * of stream, -1 on error, JAWS_SOCK_TIMEOUT when nothing came. */
#define JAWS_SOCK_TIMEOUT (-2)
long jaws_sock_recv_timed(taxi_handle_t s, void *buf, size_t cap, int wait_ms);

/* pthread_create of a thread that takes no signals (POSIX: they are all
 * blocked in it, so the dispatcher's signalfd sees them).  0 or an error
 * number. */
int jaws_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* The processors the system has online, at least 1. */
unsigned jaws_cpu_count(void);

#endif /* JAWS_OS_H */
