/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uring_floor.c - the floor for a completion loop: one thread, one
 * io_uring.  A multishot accept delivers the connections; each connection
 * has one multishot recv that takes its buffers from a provided buffer ring;
 * each buffer received is sent back as it is and returned to the ring when
 * the send completes.  One io_uring_enter per loop turn submits the sends
 * and waits for the next completions, which are reaped in a batch.
 *
 * The ring is set up single-issuer with deferred task work where the kernel
 * has it (6.1), else with cooperative task work (5.19), else plainly.
 * Nothing else is done per message, so its CPU time per message is the
 * least a Proactor over io_uring can cost.
 *
 * With URING_FLOOR_SEND_ZC=1 in the environment the sends are zero-copy
 * (IORING_OP_SEND_ZC, 6.0): a buffer goes back to the ring only with the
 * send's notification CQE, once the kernel no longer reads it.  That is
 * how the benchmark measures whether zero-copy sends pay on this machine.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.h"

#define ENTRIES 4096     /* submission queue */
#define CQ_ENTRIES 65536 /* completion queue: multishot ops fill it fast */
#define NBUF 16384       /* provided buffers (a power of two) ... */
#define BUF_SIZE 4096    /* ... of this size: 64 MiB, ample for 10,000 conns */
#define GROUP 0          /* the buffer group id */

/* What a completion is for: user_data = op | buffer id << 8 | fd << 32. */
enum { OP_ACCEPT = 1, OP_RECV, OP_SEND };

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static unsigned char *bufs;
static uint32_t sent_len[NBUF], sent_off[NBUF]; /* a buffer's send */
static int returned;                            /* buffers since advance */
static int send_zc;                             /* URING_FLOOR_SEND_ZC */
static int32_t zc_res[NBUF]; /* a zero-copy send's result, until notified */
static struct peer_options o;

static uint64_t tag(int op, unsigned bid, int fd) {
  return (uint64_t)op | (uint64_t)bid << 8 | (uint64_t)(uint32_t)fd << 32;
}

static struct io_uring_sqe *sqe_get(void) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
  while (sqe == NULL) { /* the queue is full: submit, then there is room */
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

static void arm_accept(int lfd) {
  struct io_uring_sqe *sqe = sqe_get();
  io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, tag(OP_ACCEPT, 0, lfd));
}

static void arm_recv(int fd) {
  struct io_uring_sqe *sqe = sqe_get();
  io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = GROUP;
  io_uring_sqe_set_data64(sqe, tag(OP_RECV, 0, fd));
}

static void send_rest(int fd, unsigned bid) {
  struct io_uring_sqe *sqe = sqe_get();
  if (send_zc)
    io_uring_prep_send_zc(sqe, fd,
                          bufs + (size_t)bid * BUF_SIZE + sent_off[bid],
                          sent_len[bid] - sent_off[bid], MSG_NOSIGNAL, 0);
  else
    io_uring_prep_send(sqe, fd, bufs + (size_t)bid * BUF_SIZE + sent_off[bid],
                       sent_len[bid] - sent_off[bid], MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, tag(OP_SEND, bid, fd));
}

static void give_back(unsigned bid) {
  io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, bid,
                        io_uring_buf_ring_mask(NBUF), returned++);
}

/* Returns the number of connections accepted by this completion. */
static int complete(const struct io_uring_cqe *cqe) {
  int op = (int)(cqe->user_data & 0xff), res = cqe->res;
  unsigned bid = (unsigned)(cqe->user_data >> 8 & 0xffffff);
  int fd = (int)(cqe->user_data >> 32), more = cqe->flags & IORING_CQE_F_MORE;
  switch (op) {
    case OP_ACCEPT:
      if (!more) arm_accept(fd);
      if (res < 0) {
        peer_error(&o, "accept", -res);
        return 0;
      }
      peer_nodelay(res);
      arm_recv(res);
      return 1;
    case OP_RECV:
      if (res > 0) {
        bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        sent_len[bid] = (uint32_t)res;
        sent_off[bid] = 0;
        send_rest(fd, bid);
      }
      /* Out of buffers, or ended for room in the completion queue: the
       * bytes wait in the socket; ask again.  Else the end: close. */
      if (!more && (res > 0 || res == -ENOBUFS))
        arm_recv(fd);
      else if (!more)
        close(fd);
      return 0;
    default: /* OP_SEND */
      if (send_zc) {
        /* The result first (F_MORE: a notification follows), then the
         * notification (F_NOTIF): only then may the buffer be reused. */
        if (!(cqe->flags & IORING_CQE_F_NOTIF)) {
          zc_res[bid] = res;
          if (more) return 0;
        }
        res = zc_res[bid];
      }
      if (res > 0 && sent_off[bid] + (uint32_t)res < sent_len[bid]) {
        sent_off[bid] += (uint32_t)res; /* partial: send the rest */
        send_rest(fd, bid);
      } else {
        give_back(bid); /* done, or failed: the recv sees the end */
      }
      return 0;
  }
}

static int setup_ring(void) {
  static const unsigned flags[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
          IORING_SETUP_SUBMIT_ALL,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL, 0};
  struct io_uring_params p;
  struct io_uring_buf_reg reg;
  size_t i;
  int rc = -EINVAL;
  for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    memset(&p, 0, sizeof p);
    p.flags = flags[i] | IORING_SETUP_CQSIZE;
    p.cq_entries = CQ_ENTRIES;
    rc = io_uring_queue_init_params(ENTRIES, &ring, &p);
    if (rc == 0) break;
  }
  if (rc < 0) return rc;
  br = mmap(NULL, NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  bufs = malloc((size_t)NBUF * BUF_SIZE);
  if (br == MAP_FAILED || bufs == NULL) return -ENOMEM;
  memset(&reg, 0, sizeof reg);
  reg.ring_addr = (uint64_t)(uintptr_t)br;
  reg.ring_entries = NBUF;
  reg.bgid = GROUP;
  rc = io_uring_register_buf_ring(&ring, &reg, 0);
  if (rc < 0) return rc;
  io_uring_buf_ring_init(br);
  for (i = 0; i < NBUF; i++) give_back((unsigned)i);
  io_uring_buf_ring_advance(br, returned);
  returned = 0;
  return 0;
}

int main(int argc, char **argv) {
  unsigned long long connections = 0;
  sigset_t wait_mask;
  int lfd, rc;

  peer_parse(argc, argv, "uring_floor", 0, 0, &o);
  const char *zc = getenv("URING_FLOOR_SEND_ZC");
  send_zc = zc && strcmp(zc, "1") == 0;
  peer_raise_fd_limit();
  peer_catch_stop_signals(&wait_mask);
  rc = setup_ring();
  if (rc < 0) {
    peer_error(&o, "io_uring", -rc);
    return rc == -ENOSYS || rc == -EPERM || rc == -EINVAL ? 3 : 1;
  }
  lfd = peer_listen(&o);
  arm_accept(lfd);
  while (!peer_stopping) {
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, NULL, &wait_mask);
    if (rc < 0 && rc != -EINTR && rc != -ETIME && rc != -EAGAIN &&
        rc != -EBUSY) {
      peer_error(&o, "io_uring_enter", -rc);
      return 1;
    }
    io_uring_for_each_cqe(&ring, head, cqe) {
      connections += (unsigned long long)complete(cqe);
      n++;
    }
    io_uring_cq_advance(&ring, n);
    io_uring_buf_ring_advance(br, returned);
    returned = 0;
  }
  peer_report_stop(&o, connections);
  return 0;
}
