#pragma once
// An OpenSSL BIO over a socket that writes with MSG_NOSIGNAL. OpenSSL's own
// socket BIO uses write(), which raises SIGPIPE (killing the process by
// default) when the server has closed the connection; dlock reports that as
// a lost connection instead, as the plaintext path (send with MSG_NOSIGNAL) does.

#include <openssl/bio.h>

#include <chrono>

namespace dlock::detail {

// The socket a BIO uses, the flags of its next reads (MSG_DONTWAIT to read
// only what has arrived), and when its caller gives up: OpenSSL reads and
// writes a whole record in one call, a recv() or send() at a time, so bytes
// trickling in would keep it going past any deadline the caller checks
// between calls. Past `deadline` the BIO moves no more bytes and says
// "retry", so SSL_read/SSL_write return to their caller. Owned by the
// caller, outlives the BIO.
struct SocketIo {
  int fd = -1;
  int read_flags = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// A BIO that reads and writes `io->fd` and never closes it. Null when out of memory.
BIO* make_nosignal_socket_bio(SocketIo* io);

}  // namespace dlock::detail
