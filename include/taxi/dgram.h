/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/dgram.h - UDP datagram endpoints on an I/O context (taxi/io.h).
 *
 * An endpoint is a UDP socket bound to a local address.  It receives
 * datagrams into buffers it allocated when it was opened, and hands each
 * one, with its sender's address, to the receive callback in one of the
 * context's dispatching threads.  It sends datagrams to any address, or
 * to the default peer that taxi_dgram_connect() sets.
 *
 *     static void on_recv(taxi_dgram_t *d, int status, const void *data,
 *                         size_t len, const taxi_addr_t *from,
 *                         unsigned flags, void *arg) {
 *       if (status == 0) taxi_dgram_send_to(d, data, len, from); // echo
 *     }
 *     taxi_dgram_t *d;
 *     taxi_dgram_open(&d, io, "127.0.0.1:0", NULL, on_recv, NULL);
 *
 * Callbacks.  The receive callback and the close callback of one endpoint
 * never run in two threads at once, as a stream's (taxi/stream.h); those
 * of different endpoints may.  After the close callback nothing of the
 * endpoint runs, and the endpoint's memory is gone.
 *
 * Sends.  taxi_dgram_send_to() copies the datagram: it is sent at once
 * when the socket takes it, else queued in a slot of the endpoint's send
 * queue (its bytes and its slots bounded by the options) and sent when
 * the socket is writable, in order.  The caller's buffer is its own again
 * when the call returns, and no completion is called.  An error of a
 * queued send reaches the receive callback (its status), since the call
 * that queued it has returned.  A send made in the endpoint's own receive
 * callback is queued so: the datagrams that one receive batch brought
 * are delivered first, and the sends their callbacks made leave together
 * after the last of them, in one batch (one sendmmsg for an echo of the
 * whole batch), their errors told to the receive callback then.  When
 * the batch is one datagram, the first send of its callback goes at
 * once if nothing is queued (there is nothing to wait for), without a
 * copy; its error is still told to the receive callback after the
 * batch, and a close later in the callback no longer drops it.
 *
 * Segments.  taxi_dgram_send_segments() sends a run of equal-size
 * datagrams in one call; with TAXI_DGRAM_GSO the kernel cuts them from
 * one buffer (Linux's UDP_SEGMENT), and with TAXI_DGRAM_GRO a receiver
 * lets the kernel hand it such runs whole (UDP_GRO), which the endpoint
 * cuts back into the datagrams for the receive callback, in order.
 *
 * Dispatchers.  Endpoints work on every dispatcher, with the same API
 * and semantics.  On the readiness dispatchers (TAXI_IO_REACTOR,
 * TAXI_IO_LF, TAXI_IO_HSHA) the driver receives and sends at readiness,
 * in batches (recvmmsg and sendmmsg on Linux; recvfrom and sendto
 * elsewhere).  On the completion dispatchers (TAXI_IO_PROACTOR,
 * TAXI_IO_PROACTORS, where the endpoint lives on one proactor of the
 * group) it keeps options.recv_batch receives in flight
 * (taxi_proactor_recvfrom in taxi/proactor.h), each into its own receive
 * buffer, delivered in the order the datagrams arrived, and sends what
 * the socket cannot take at once with taxi_proactor_sendto.  io_uring
 * (Linux 6.0) receives with one multishot IORING_OP_RECVMSG into a ring
 * of provided buffers of the proactor's instead of the endpoint's own
 * buffers: the context's pool when a buffer of it holds recv_size (3,952
 * bytes or less), else the proactor's group of buffers sized for it (up
 * to 16 KiB, up to 64 KiB: recv_size 65,536 or less, the default
 * included), shared by its endpoints, made with the first of them and
 * grown with the datagrams in flight; a datagram longer than recv_size is
 * cut there (TAXI_DGRAM_TRUNCATED) whatever size the buffers are.  A
 * larger recv_size, or a kernel without provided buffers, keeps
 * recv_batch IORING_OP_RECVMSG receives into the endpoint's own buffers.
 * IOCP receives with WSARecvFrom; POSIX aio's
 * aiocb has no room for an address, so the aio backend receives and
 * sends datagrams at readiness through its internal reactor, as the
 * emulated Proactor does (docs/backends/aio.md).
 *
 * No memory is allocated per datagram: the receive buffers (and over a
 * Proactor the receive operations' records) and the send queue are
 * allocated with the endpoint; the multishot receive takes the buffers of
 * the proactor's pool, made with the proactor, or of its group, made with
 * the first endpoint that needs it (each grown by the proactor, up to a
 * bound, while its buffers are all taken; taxi_proactor_stats counts
 * them).
 */
#ifndef TAXI_DGRAM_H
#define TAXI_DGRAM_H

#include "platform.h"
#include "addr.h"
#include "io.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct taxi_dgram taxi_dgram_t; /* a datagram endpoint */

/* The longest datagram taxi sends: the largest UDP payload over IPv4
 * (65,535 less the IPv4 and UDP headers). */
#define TAXI_DGRAM_MAX 65507

/* Flags of a received datagram (the receive callback's `flags`). */
/* The datagram was longer than the receive buffer (options.recv_size):
 * `len` bytes of it are delivered, the rest is lost. */
#define TAXI_DGRAM_TRUNCATED 0x1u

/* Options of taxi_dgram_open (taxi_dgram_options_t.flags). */
/* An IPv6 endpoint takes no IPv4 traffic (default: it does, where the
 * system allows it). */
#define TAXI_DGRAM_V6ONLY 0x1u
/* Bind even where other sockets are bound to the port (SO_REUSEADDR: for
 * several receivers of one multicast group). */
#define TAXI_DGRAM_REUSEADDR 0x2u
/* Permit sending to broadcast addresses (SO_BROADCAST); also
 * taxi_dgram_set_broadcast(). */
#define TAXI_DGRAM_BROADCAST 0x4u
/* Send the segments of taxi_dgram_send_segments() in one system call that
 * the kernel (or the device) cuts into datagrams (Linux 4.18 on:
 * UDP_SEGMENT).  Without it, or where a path refuses it (a segment above
 * its MTU, a device without checksum offload), they go as a batch of
 * datagrams (sendmmsg).  taxi_dgram_open() refuses it with TAXI_ENOTSUP
 * where the system has no such option. */
#define TAXI_DGRAM_GSO 0x8u
/* Let the kernel coalesce the datagrams that arrive for the endpoint into
 * one receive of equal-size segments (Linux 5.0 on: UDP_GRO); the endpoint
 * splits them back, and the receive callback sees each datagram as it was
 * sent, in order.  Fewer receives under a flood of equal-size datagrams
 * (from a sender that used segments, or through a device that coalesces).
 * Needs options.recv_size of 65,536 (the default) or more, as a coalesced
 * receive is up to 64 KiB.  taxi_dgram_open() refuses it with TAXI_ENOTSUP
 * where the system has no such option, and on the Proactor's dispatchers
 * (TAXI_IO_PROACTOR, TAXI_IO_PROACTORS), whose receives bring no segment
 * size to cut a coalesced one by. */
#define TAXI_DGRAM_GRO 0x10u

/* The most segments one taxi_dgram_send_segments() call sends (what Linux
 * sends in one UDP_SEGMENT call). */
#define TAXI_DGRAM_SEGMENTS_MAX 64

/*
 * A datagram arrived, or the socket reported an error.
 *   status 0: `len` bytes at `data` from `from`; `flags` may have
 *     TAXI_DGRAM_TRUNCATED.  data and from are the endpoint's and valid
 *     only during the call (copy what is kept).  from is of the
 *     endpoint's family: on a dual-stack IPv6 endpoint an IPv4 sender's
 *     address is IPv4-mapped (RFC 4291: TAXI_ADDR_IPV6, its address ten
 *     zero bytes, two 0xff bytes, then the IPv4 address; its port the
 *     sender's), which taxi_dgram_send_to() takes back, as it takes the
 *     plain IPv4 form.
 *   status < 0: an error, data and from NULL, len 0: an ICMP error on a
 *     connected endpoint (TAXI_ECONNREFUSED: the peer's port had no
 *     socket; TAXI_ESYS for others, taxi_last_os_error() telling; Windows
 *     reports port unreachable on unconnected endpoints too), or a
 *     queued send that failed (TAXI_EMSGSIZE, TAXI_EPERM ...).  The
 *     endpoint stays open: closing it is the application's choice.
 * Runs in a dispatching thread of the context; may call any function of
 * this header on d, taxi_dgram_close() included.
 */
typedef void (*taxi_dgram_recv_fn)(taxi_dgram_t *d, int status,
                                   const void *data, size_t len,
                                   const taxi_addr_t *from, unsigned flags,
                                   void *arg);

/* The endpoint is closed: nothing of it runs after this, and d is freed
 * when it returns.  Runs in a dispatching thread of the context (or in
 * the thread of taxi_io_destroy). */
typedef void (*taxi_dgram_close_fn)(taxi_dgram_t *d, void *arg);

/* The options of taxi_dgram_open: the sizes of the buffers allocated with
 * the endpoint, and socket options.  Fill with taxi_dgram_options_init. */
typedef struct taxi_dgram_options {
  /* Bytes of each receive buffer: a longer datagram is truncated
   * (TAXI_DGRAM_TRUNCATED).  0: 65,536 (every datagram over IPv4).
   * At most 16 MiB. */
  size_t recv_size;
  /* Receive buffers, and datagrams taken per readiness report, or
   * receives kept in flight over a Proactor (one multishot receive
   * instead where it takes the pool's buffers: see above; then the most
   * datagrams, of those the proactor reported together, delivered as one
   * batch, whose replies leave together) (1..64; 0: 4). */
  unsigned recv_batch;
  /* Bytes the send queue holds (0: 256 KiB; at least TAXI_DGRAM_MAX, at
   * most 1 GiB). */
  size_t send_queue;
  /* Datagrams the send queue holds (0: 64; at most 65,536). */
  unsigned send_slots;
  /* TAXI_DGRAM_* above.  The options are versioned by their flags: a new
   * option is a new bit, so the structure keeps its size. */
  unsigned flags;
} taxi_dgram_options_t;

/* Fill *o with the defaults.  Threads: any. */
TAXI_EXTERN void taxi_dgram_options_init(taxi_dgram_options_t *o);

/*
 * taxi_dgram_open - a UDP endpoint of io bound to `local` (a numeric
 * address as taxi_addr_parse() reads it: "127.0.0.1:0", "[::1]:5353",
 * "*:9000"; port 0: a free port, taxi_dgram_address() tells which), with
 * options o (NULL: the defaults), delivering to fn(arg).  It receives
 * from the start, in io's dispatching threads.
 *
 * Returns 0 and sets *out, or TAXI_EINVAL (NULL out, io, local or fn; an
 * option out of range, with its detail; TAXI_DGRAM_GRO with recv_size
 * below 65,536), TAXI_EBADADDR (local not an IPv4 or IPv6 address),
 * TAXI_ENOTSUP (TAXI_DGRAM_GSO or TAXI_DGRAM_GRO where the system lacks
 * them, TAXI_DGRAM_GRO on a Proactor's dispatcher; with its detail),
 * TAXI_ESTOPPED (io is being destroyed), TAXI_EADDRINUSE, TAXI_EPERM,
 * TAXI_ENOMEM, TAXI_ESYS, or the proactor's refusal of the socket or of
 * its first receive.
 * Threads: any.  Ownership: the endpoint is io's until closed; close it
 * with taxi_dgram_close() (taxi_io_destroy() closes those left).
 */
TAXI_EXTERN int taxi_dgram_open(taxi_dgram_t **out, taxi_io_t *io,
                                const char *local,
                                const taxi_dgram_options_t *o,
                                taxi_dgram_recv_fn fn, void *arg);

/*
 * taxi_dgram_connect - make `peer` (a numeric address) the default peer:
 * taxi_dgram_send() sends there, only its datagrams are received, and
 * ICMP errors of the sends reach the receive callback (an unconnected
 * socket is not told of them).  May be called again to change it.
 * (Over a Proactor a datagram a receive took just before the connect
 * may still be delivered after it.)
 * Returns 0, or TAXI_EINVAL (NULL), TAXI_EBADADDR (peer not an address of
 * the endpoint's family), TAXI_EBADF (closed), TAXI_ESYS.  Threads: any.
 */
TAXI_EXTERN int taxi_dgram_connect(taxi_dgram_t *d, const char *peer);

/*
 * taxi_dgram_send_to - send the `len` bytes at `data` (0 allowed) as one
 * datagram to `to` (NULL: the default peer).  The bytes are copied (see
 * "Sends" above): data is the caller's again on return.
 * Returns 0 (sent or queued; in d's own receive callback, queued: see
 * "Sends" above), or TAXI_EINVAL (NULL d; NULL data with len above 0),
 * TAXI_EMSGSIZE (len above TAXI_DGRAM_MAX), TAXI_EBADADDR (to of no IP family),
 * TAXI_ENOENT (to NULL and no default peer), TAXI_EBADF (closed, or closing),
 * TAXI_EAGAIN (the queue's bytes are full: send again after the callbacks have
 * run), TAXI_ENOBUFS (its slots are all taken), or an error the socket reported
 * at once (TAXI_ECONNREFUSED: an earlier datagram of a connected endpoint was
 * refused; TAXI_EMSGSIZE: too long for the path). Threads: any; sends of one
 * thread go out in their order.
 */
TAXI_EXTERN int taxi_dgram_send_to(taxi_dgram_t *d, const void *data,
                                   size_t len, const taxi_addr_t *to);

/* taxi_dgram_send - taxi_dgram_send_to() the default peer. */
TAXI_EXTERN int taxi_dgram_send(taxi_dgram_t *d, const void *data, size_t len);

/*
 * taxi_dgram_send_segments - send the `len` bytes at `data` as datagrams
 * of `seg` bytes each, the last one possibly shorter (len / seg rounded
 * up of them, at most TAXI_DGRAM_SEGMENTS_MAX), to `to` (NULL: the default
 * peer): what taxi_dgram_send_to() would do once per segment, in order,
 * in fewer system calls.  With TAXI_DGRAM_GSO, and segments that fit one
 * IPv4 datagram together (len at most TAXI_DGRAM_MAX), one call sends
 * them all; otherwise a batch (sendmmsg) does.  The bytes are copied as
 * by taxi_dgram_send_to(); the segments are sent or queued all, or none
 * of them (TAXI_EAGAIN, TAXI_ENOBUFS: nothing went).
 * Returns 0, or TAXI_EINVAL (NULL d; NULL data; len 0; seg 0 or above
 * TAXI_DGRAM_MAX; more than TAXI_DGRAM_SEGMENTS_MAX segments: each with
 * its detail), TAXI_EBADADDR, TAXI_ENOENT, TAXI_EBADF, TAXI_EAGAIN,
 * TAXI_ENOBUFS as taxi_dgram_send_to(), or an error the socket reported
 * at once: the segment it concerned is dropped, those before it went,
 * those after it went or are queued.
 * Threads: any; sends of one thread go out in their order.
 */
TAXI_EXTERN int taxi_dgram_send_segments(taxi_dgram_t *d, const void *data,
                                         size_t len, size_t seg,
                                         const taxi_addr_t *to);

/* What an endpoint did, for tests and monitoring (taxi_dgram_counters). */
typedef struct taxi_dgram_counters {
  uint64_t received;      /* datagrams given to the receive callback */
  uint64_t coalesced;     /* receives the kernel coalesced (TAXI_DGRAM_GRO),
                             each split into several of those datagrams */
  uint64_t segment_sends; /* system calls that sent several segments of
                             taxi_dgram_send_segments() (TAXI_DGRAM_GSO) */
} taxi_dgram_counters_t;

/*
 * taxi_dgram_counters - copy d's counters to *out.  Returns 0, or
 * TAXI_EINVAL (NULL), TAXI_EBADF (closed).  Threads: any (the counts are
 * those of a moment: a callback running meanwhile may add to them).
 */
TAXI_EXTERN int taxi_dgram_counters(taxi_dgram_t *d,
                                    taxi_dgram_counters_t *out);

/*
 * taxi_dgram_address - the endpoint's local address (its port, when it
 * was opened with port 0), as read when it was bound and again after each
 * taxi_dgram_connect (bound to a wildcard, the socket then has the address
 * of the route to the peer).  No system call.  Returns 0, or TAXI_EINVAL
 * (NULL), TAXI_EBADF (closed).  Threads: any.
 */
TAXI_EXTERN int taxi_dgram_address(taxi_dgram_t *d, taxi_addr_t *out);

/*
 * taxi_dgram_set_broadcast - permit (on) or forbid sending to broadcast
 * addresses.  Returns 0, or TAXI_EINVAL (NULL), TAXI_EBADF (closed),
 * TAXI_ESYS.  Threads: any.
 */
TAXI_EXTERN int taxi_dgram_set_broadcast(taxi_dgram_t *d, bool on);

/*
 * taxi_dgram_join - receive the datagrams sent to multicast `group` (a
 * numeric address; its port is ignored: the endpoint's is the one that
 * counts) on the interface with the address `iface` (NULL: the system
 * chooses; ignored for IPv6, where the group's scope names it);
 * taxi_dgram_leave() stops that, given the same group and interface.  Returns
 * 0, or TAXI_EINVAL (NULL d or group), TAXI_EBADADDR (not a multicast address,
 * or not of the endpoint's family), TAXI_EBADF (closed), TAXI_EADDRINUSE
 * (joined already, on some systems), TAXI_ESYS.  Threads: any.
 */
TAXI_EXTERN int taxi_dgram_join(taxi_dgram_t *d, const char *group,
                                const char *iface);

/* taxi_dgram_leave - stop receiving what is sent to `group` on `iface`
 * (as given to taxi_dgram_join).  Returns and threads as
 * taxi_dgram_join, and TAXI_ESYS (TAXI_EADDRINUSE on some systems) when
 * the endpoint was not a member. */
TAXI_EXTERN int taxi_dgram_leave(taxi_dgram_t *d, const char *group,
                                 const char *iface);

/*
 * taxi_dgram_close - close the endpoint: no receive callback starts after
 * this call (one running in another thread finishes), datagrams still
 * queued are dropped, and fn(d, arg) (NULL: none) runs once nothing of d
 * runs any more; then d is freed.  The socket is closed before fn runs,
 * and over a Proactor only once every receive in flight on it has
 * completed (cancelled): no request still names its number then.
 * Returns 0, or TAXI_EINVAL (NULL), TAXI_EBADF (closing already).
 * Threads: any, the endpoint's callbacks included.
 */
TAXI_EXTERN int taxi_dgram_close(taxi_dgram_t *d, taxi_dgram_close_fn fn,
                                 void *arg);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_DGRAM_H */
