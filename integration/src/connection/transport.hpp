#pragma once
// The byte stream under a RedisConnection: a connected TCP socket, with TLS
// on top when redis.tls says so. Plaintext and TLS share every code path
// above the two calls that move bytes (send/recv or SSL_write/SSL_read).
//
// The socket blocks, each wait bounded by the kernel (SO_RCVTIMEO and
// SO_SNDTIMEO, set by limit_waits): a command's reply then costs one recv()
// where a poll() before it would double the system calls of the hot path.
// A call gives up at its deadline or, when the deadline falls inside a wait,
// at the end of that wait. Not thread-safe: one connection, one user at a time.

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dlock/config.hpp"
#include "tls/nosignal_bio.hpp"

namespace dlock::detail {

using Deadline = std::chrono::steady_clock::time_point;

// What went wrong below the Redis protocol; RedisConnection turns it into a
// ConnectionError that says what to do (connection_failure.hpp).
class TransportError : public std::runtime_error {
 public:
  enum class Kind {
    refused,             // nothing listens there
    timed_out,           // the deadline passed first
    lost,                // the peer closed or reset the connection
    failed,              // any other socket or resolver error
    garbled,             // bytes that are not RESP (set by RedisConnection, whose reader parses them)
    tls_handshake,       // the server did not speak TLS back
    tls_untrusted,       // its certificate chain does not lead to a CA we trust
    tls_expired,         // its certificate is out of its validity period
    tls_name_mismatch,   // its certificate does not name the host dialled (or redis.tls.server_name)
    tls_unverified,      // any other verification failure
    tls_client_refused,  // it refused our client certificate, or wanted one we did not send
    tls_failed,          // any other TLS error on an established connection
  };
  TransportError(Kind kind, const std::string& cause) : std::runtime_error(cause), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class Transport {
 public:
  // Takes a connected socket (socket_dial.hpp) and closes it when destroyed.
  explicit Transport(int fd);

  // Each wait for the socket (one read, one write) lasts at most `limit`.
  void limit_waits(std::chrono::milliseconds limit);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Runs the TLS handshake with `context`, sending SNI and checking the
  // certificate's name as `tls` says (server_name, else `host`). Throws
  // TransportError (tls_* kinds, or timed_out).
  void start_tls(std::shared_ptr<SSL_CTX> context, const std::string& host, const TlsConfig& tls, Deadline deadline);

  // Writes all of `data`, waiting for room until the deadline (or the end of
  // the wait the deadline falls in).
  void write_all(std::string_view data, Deadline deadline);
  // Waits for bytes and returns how many were read (> 0); gives up (timed_out)
  // once the deadline has passed, bytes trickling in or not.
  std::size_t read_some(char* buffer, std::size_t size, Deadline deadline);
  // Reads what has arrived without waiting; 0 when nothing has (with TLS,
  // also when only TLS housekeeping such as a session ticket arrived).
  std::size_t read_now(char* buffer, std::size_t size);

  // Bytes already received, waiting inside OpenSSL (decrypted, or read ahead
  // of the record being decrypted): poll() does not see them, so read_now()
  // before any poll(). A partial record may need more from the socket:
  // read_now() then returns 0, and poll() is right.
  bool pending() const { return ssl_ != nullptr && (SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1); }
  int fd() const { return fd_; }

  // Makes the destructor send nothing (no TLS close_notify): for a
  // connection inherited across fork(), whose socket the parent still uses,
  // or one whose stream is in an unknown state.
  void abandon() { abandoned_ = true; }

 private:
  // One attempt: bytes moved (> 0), or 0 when a wait ran out (or was
  // interrupted, or only TLS housekeeping came). `wait`: block in the kernel.
  std::size_t read_once(char* buffer, std::size_t size, bool wait);
  std::size_t write_once(const char* data, std::size_t size);
  static void check(Deadline deadline);  // throws timed_out once it has passed

  int fd_;
  SocketIo io_;  // what the TLS BIO reads and writes through
  std::chrono::milliseconds wait_limit_{0};
  SSL* ssl_ = nullptr;
  std::shared_ptr<SSL_CTX> context_;  // kept alive while ssl_ uses it
  bool abandoned_ = false;
};

}  // namespace dlock::detail
