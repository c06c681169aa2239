/* SPDX-License-Identifier: Apache-2.0 */
// asio_echo.cpp - the echo server on Boost.Asio, written the way Asio's own
// examples write it: an acceptor, and per connection a session object
// (shared_ptr) whose async_read_some completion starts an async_write of what
// came and whose write completion starts the next read.  One io_context run
// by --threads threads (default 2), as a multi-threaded Asio server is
// usually run; SIGINT and SIGTERM stop it through a signal_set.
//
// Asio recycles the memory of its completion handlers per thread, so in
// steady state nothing should be allocated per message.
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "peer.h"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

peer_options options;
std::atomic<unsigned long long> connections{0};

class session : public std::enable_shared_from_this<session> {
 public:
  explicit session(tcp::socket socket) : socket_(std::move(socket)) {}

  void read() {
    auto self = shared_from_this();
    socket_.async_read_some(
        asio::buffer(buf_),
        [this, self](const boost::system::error_code &ec, std::size_t n) {
          if (!ec) write(n);
        });
  }

 private:
  void write(std::size_t n) {
    auto self = shared_from_this();
    asio::async_write(
        socket_, asio::buffer(buf_.data(), n),
        [this, self](const boost::system::error_code &ec, std::size_t) {
          if (!ec) read();
        });
  }

  tcp::socket socket_;
  std::array<char, 16384> buf_;
};

void accept_next(tcp::acceptor &acceptor) {
  acceptor.async_accept(
      [&acceptor](const boost::system::error_code &ec, tcp::socket socket) {
        if (!ec) {
          peer_nodelay(socket.native_handle());
          connections++;
          std::make_shared<session>(std::move(socket))->read();
        } else if (ec == asio::error::operation_aborted) {
          return;
        } else {
          peer_error(&options, "accept", ec.value());
        }
        accept_next(acceptor);
      });
}

}  // namespace

int main(int argc, char **argv) {
  peer_parse(argc, argv, "asio_echo", 2, 64, &options);
  peer_raise_fd_limit();
  try {
    asio::io_context context(static_cast<int>(options.threads));
    asio::signal_set signals(context, SIGINT, SIGTERM);
    signals.async_wait(
        [&context](const boost::system::error_code &, int) { context.stop(); });

    int fd = peer_listen(&options);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    tcp::acceptor acceptor(context);
    acceptor.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd);
    accept_next(acceptor);

    std::vector<std::thread> threads;
    for (unsigned i = 1; i < options.threads; i++)
      threads.emplace_back([&context] { context.run(); });
    context.run();
    for (auto &t : threads) t.join();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: %s\n", options.name, e.what());
    return 1;
  }
  peer_report_stop(&options, connections.load());
  return 0;
}
