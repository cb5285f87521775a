#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace dlock::test {

struct TcpProxy::Link {
  int client = -1;
  int server = -1;
  std::atomic<bool> blackholed{false};
  std::atomic<int> delay_ms{0};  // this link's own, on top of the proxy's
  ~Link() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(0);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("test proxy cannot listen on 127.0.0.1");
  }
  socklen_t length = sizeof address;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    threads = std::move(threads_);
  }
  for (auto& thread : threads) thread.join();
  ::close(listen_fd_);
}

void TcpProxy::blackhole_existing() {
  std::lock_guard lock(mutex_);
  for (auto& link : links_) link->blackholed = true;
}

void TcpProxy::slow_existing(int ms) {
  std::lock_guard lock(mutex_);
  for (auto& link : links_) link->delay_ms = ms;
}

void TcpProxy::accept_loop() {
  while (!stopping_) {
    pollfd watched{listen_fd_, POLLIN, 0};
    if (::poll(&watched, 1, 50) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    auto link = std::make_shared<Link>();
    link->client = client;
    link->server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in target = loopback(target_port_);
    if (::connect(link->server, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) continue;
    ++accepted_;
    std::lock_guard lock(mutex_);
    links_.push_back(link);
    threads_.emplace_back([link, this] { pump(link, link->client, link->server, stopping_, delay_ms_); });
    threads_.emplace_back([link, this] { pump(link, link->server, link->client, stopping_, delay_ms_); });
  }
}

void TcpProxy::pump(const std::shared_ptr<Link>& link, int from, int to, std::atomic<bool>& stopping,
                    const std::atomic<int>& delay_ms) {
  char buffer[16384];
  while (!stopping) {
    pollfd watched{from, POLLIN, 0};
    if (::poll(&watched, 1, 50) <= 0) continue;
    const ssize_t got = ::read(from, buffer, sizeof buffer);
    if (got <= 0) {
      // The peer closed: pass the close on, as a real link would (unless it is black-holed).
      if (!link->blackholed) ::shutdown(to, SHUT_WR);
      return;
    }
    if (link->blackholed) continue;
    if (const int delay = delay_ms.load() + link->delay_ms.load(); delay > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    for (ssize_t sent = 0; sent < got;) {
      // MSG_NOSIGNAL: a peer gone while a chunk waited must not SIGPIPE the test.
      const ssize_t wrote = ::send(to, buffer + sent, static_cast<size_t>(got - sent), MSG_NOSIGNAL);
      if (wrote <= 0) return;
      sent += wrote;
    }
  }
}

}  // namespace dlock::test
