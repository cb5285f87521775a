// The transport: the TLS handshake with its server-name checks, and the reads and writes of
// plain TCP or TLS, each wait bounded by the socket's timeouts and the caller's deadline.
#include "connection/transport.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "tls/nosignal_bio.hpp"
#include "tls/tls_failure.hpp"

namespace dlock::detail {
namespace {

bool is_ip_literal(const std::string& name) {
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, name.c_str(), address) == 1 || ::inet_pton(AF_INET6, name.c_str(), address) == 1;
}

// OpenSSL counts in int.
int clamp_to_int(std::size_t size) { return static_cast<int>(std::min<std::size_t>(size, INT_MAX)); }

}  // namespace

Transport::Transport(int fd) : fd_(fd), io_{fd, 0} {}

void Transport::limit_waits(std::chrono::milliseconds limit) {
  // 0 would mean no limit at all to the kernel.
  limit = std::max(limit, std::chrono::milliseconds(1));
  if (limit == wait_limit_) return;
  const timeval value{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &value, sizeof value) != 0 ||
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &value, sizeof value) != 0) {
    throw socket_failure(errno);
  }
  wait_limit_ = limit;
}

void Transport::check(Deadline deadline) {
  if (std::chrono::steady_clock::now() >= deadline) throw TransportError(TransportError::Kind::timed_out, "timed out");
}

Transport::~Transport() {
  if (ssl_ != nullptr) {
    // One non-blocking try at close_notify, only on a connection that is ours
    // and sound: on an inherited one it would end the parent's session.
    if (!abandoned_) {
      ERR_clear_error();
      (void)SSL_shutdown(ssl_);
      ERR_clear_error();
    }
    SSL_free(ssl_);  // frees the BIO too; sends nothing
  }
  ::close(fd_);
}

void Transport::start_tls(std::shared_ptr<SSL_CTX> context, const std::string& host, const TlsConfig& tls,
                          Deadline deadline) {
  context_ = std::move(context);
  ssl_ = SSL_new(context_.get());
  BIO* bio = ssl_ != nullptr ? make_nosignal_socket_bio(&io_) : nullptr;
  if (bio == nullptr) throw TransportError(TransportError::Kind::failed, "out of memory setting up TLS");
  SSL_set_bio(ssl_, bio, bio);

  const std::string& name = tls.server_name.empty() ? host : tls.server_name;
  const bool ip = is_ip_literal(name);
  // SNI carries host names only (RFC 6066); an address is checked against the certificate's IP entries.
  const bool named = ip ? true : SSL_set_tlsext_host_name(ssl_, name.c_str()) == 1;
  const bool checked = !tls.verify || (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str()) == 1
                                          : SSL_set1_host(ssl_, name.c_str()) == 1);
  if (!named || !checked) {
    ERR_clear_error();
    throw TransportError(TransportError::Kind::tls_unverified, "'" + name + "' cannot be used as a TLS server name");
  }

  limit_waits(std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
  io_.deadline = deadline;
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int result = SSL_connect(ssl_);
    if (result == 1) return;
    const int error = SSL_get_error(ssl_, result);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) throw handshake_failure(ssl_, error);
    check(deadline);  // a wait ran out (or was interrupted) before the deadline: go on
  }
}

void Transport::write_all(std::string_view data, Deadline deadline) {
  io_.deadline = deadline;
  while (!data.empty()) {
    const std::size_t written = write_once(data.data(), data.size());
    if (written > 0) {
      data.remove_prefix(written);
    } else {
      check(deadline);
    }
  }
}

std::size_t Transport::read_some(char* buffer, std::size_t size, Deadline deadline) {
  io_.deadline = deadline;
  for (;;) {
    // Before each wait, not only after an empty one: a reply trickling in a
    // byte at a time must not start a fresh wait with every byte.
    check(deadline);
    if (const std::size_t got = read_once(buffer, size, true); got > 0) return got;
  }
}

std::size_t Transport::read_now(char* buffer, std::size_t size) {
  io_.deadline = Deadline::max();
  return read_once(buffer, size, false);
}

namespace {

bool interrupted_or_timed_out(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

}  // namespace

std::size_t Transport::read_once(char* buffer, std::size_t size, bool wait) {
  const int flags = wait ? 0 : MSG_DONTWAIT;
  if (ssl_ == nullptr) {
    const auto got = ::recv(fd_, buffer, size, flags);
    if (got > 0) return static_cast<std::size_t>(got);
    if (got < 0 && interrupted_or_timed_out(errno)) return 0;
    throw socket_failure(got == 0 ? 0 : errno);
  }
  io_.read_flags = flags;
  ERR_clear_error();
  errno = 0;
  const int got = SSL_read(ssl_, buffer, clamp_to_int(size));
  io_.read_flags = 0;
  if (got > 0) return static_cast<std::size_t>(got);
  const int error = SSL_get_error(ssl_, got);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return 0;
  throw transfer_failure(error);
}

std::size_t Transport::write_once(const char* data, std::size_t size) {
  if (ssl_ == nullptr) {
    const auto written = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (written >= 0) return static_cast<std::size_t>(written);
    if (interrupted_or_timed_out(errno)) return 0;
    throw socket_failure(errno);
  }
  ERR_clear_error();
  errno = 0;
  const int written = SSL_write(ssl_, data, clamp_to_int(size));
  if (written > 0) return static_cast<std::size_t>(written);
  const int error = SSL_get_error(ssl_, written);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return 0;
  throw transfer_failure(error);
}

}  // namespace dlock::detail
