// The BIO methods over a socket: send with MSG_NOSIGNAL, recv with the caller's flags, and
// "retry" past the caller's deadline so OpenSSL returns in time.
#include "tls/nosignal_bio.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace dlock::detail {
namespace {

const SocketIo& io_of(BIO* bio) { return *static_cast<const SocketIo*>(BIO_get_data(bio)); }

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

// Past the caller's deadline: no more bytes, and "retry" (see SocketIo).
bool past_deadline(BIO* bio) {
  if (std::chrono::steady_clock::now() < io_of(bio).deadline) return false;
  errno = EAGAIN;
  return true;
}

int write_socket(BIO* bio, const char* data, int size) {
  if (past_deadline(bio)) {
    BIO_clear_retry_flags(bio);
    BIO_set_retry_write(bio);
    return -1;
  }
  const auto written = ::send(io_of(bio).fd, data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  BIO_clear_retry_flags(bio);
  if (written < 0 && would_block(errno)) BIO_set_retry_write(bio);
  return static_cast<int>(written);
}

int read_socket(BIO* bio, char* buffer, int size) {
  if (past_deadline(bio)) {
    BIO_clear_retry_flags(bio);
    BIO_set_retry_read(bio);
    return -1;
  }
  const auto got = ::recv(io_of(bio).fd, buffer, static_cast<std::size_t>(size), io_of(bio).read_flags);
  BIO_clear_retry_flags(bio);
  if (got < 0 && would_block(errno)) BIO_set_retry_read(bio);
  return static_cast<int>(got);
}

long control(BIO*, int command, long, void*) {
  // OpenSSL flushes after each record it writes; a socket has nothing to flush.
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

int create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* nosignal_socket_method() {
  // Built once, on first use, and kept for the life of the process.
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlock socket");
    if (made == nullptr) return made;
    BIO_meth_set_write(made, write_socket);
    BIO_meth_set_read(made, read_socket);
    BIO_meth_set_ctrl(made, control);
    BIO_meth_set_create(made, create);
    return made;
  }();
  return method;
}

}  // namespace

BIO* make_nosignal_socket_bio(SocketIo* io) {
  const BIO_METHOD* method = nosignal_socket_method();
  if (method == nullptr) return nullptr;
  BIO* bio = BIO_new(method);
  if (bio != nullptr) BIO_set_data(bio, io);
  return bio;
}

}  // namespace dlock::detail
