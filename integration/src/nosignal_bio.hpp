#pragma once
// An OpenSSL BIO over a socket that writes with MSG_NOSIGNAL. OpenSSL's own
// socket BIO uses write(), which raises SIGPIPE (killing the process by
// default) when the server has closed the connection; dlock reports that as
// a lost connection instead, as the plaintext path (send with MSG_NOSIGNAL) does.

#include <openssl/bio.h>

namespace dlock::detail {

// The socket a BIO uses, and the flags of its next reads (MSG_DONTWAIT to
// read only what has arrived). Owned by the caller, outlives the BIO.
struct SocketIo {
  int fd = -1;
  int read_flags = 0;
};

// A BIO that reads and writes `io->fd` and never closes it. Null when out of memory.
BIO* make_nosignal_socket_bio(SocketIo* io);

}  // namespace dlock::detail
