// dial: a TCP connect to each address of a host in turn within the connect deadline, with
// TCP_NODELAY and hiredis' keepalive settings on the socket, and a connection to itself refused.
#include "connection/socket_dial.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace dlock::detail {
namespace {

// As hiredis' redisKeepAlive: the first probe after 15 s idle, then every
// 5 s, three unanswered probes drop the connection.
constexpr int kKeepAliveIdleSeconds = 15;

void tune(int fd) {
  // Failure to set either is not fatal: the connection works without them.
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  const int idle = kKeepAliveIdleSeconds, interval = kKeepAliveIdleSeconds / 3, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// Whether the socket is connected to itself: dialling a local port nobody
// listens on can pick that very port as the source (TCP's simultaneous open),
// and the "server" then answers every command with the command itself. A
// connection dialled again every 50 ms while Redis restarts (the master
// watch) would meet it sooner or later, and hold the port the restarted
// server needs.
bool connected_to_itself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof local, peer_length = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    return false;
  }
  return local_length == peer_length && std::memcmp(&local, &peer, local_length) == 0;
}

TransportError from_errno(int error) {
  const std::string cause = std::strerror(error);
  if (error == ECONNREFUSED) return TransportError(TransportError::Kind::refused, cause);
  if (error == ETIMEDOUT) return TransportError(TransportError::Kind::timed_out, cause);
  return TransportError(TransportError::Kind::failed, cause);
}

// Connects one address; returns the socket or throws.
int connect_one(const addrinfo& address, Deadline deadline) {
  const int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) throw from_errno(errno);
  try {
    if (::connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
      if (errno != EINPROGRESS) throw from_errno(errno);
      for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd watched{fd, POLLOUT, 0};
        const int ready = ::poll(&watched, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) throw from_errno(errno);
        if (ready == 0) throw TransportError(TransportError::Kind::timed_out, "connect timed out");
        break;
      }
      int error = 0;
      socklen_t length = sizeof error;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) throw from_errno(errno);
      if (error != 0) throw from_errno(error);
    }
    if (connected_to_itself(fd)) throw from_errno(ECONNREFUSED);  // nobody listens there
    tune(fd);
    if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) throw from_errno(errno);
    return fd;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace

int dial(const std::string& host, int port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); status != 0) {
    throw TransportError(TransportError::Kind::failed,
                         status == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(status));
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, freeaddrinfo);
  // The last address's error stands for all: usually they fail alike.
  std::unique_ptr<TransportError> last;
  for (const addrinfo* address = found; address != nullptr; address = address->ai_next) {
    try {
      return connect_one(*address, deadline);
    } catch (const TransportError& error) {
      if (error.kind() == TransportError::Kind::timed_out) throw;
      last = std::make_unique<TransportError>(error);
    }
  }
  throw last ? *last : TransportError(TransportError::Kind::failed, "the host resolves to no address");
}

}  // namespace dlock::detail
