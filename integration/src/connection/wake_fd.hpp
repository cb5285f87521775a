#pragma once
// A wake-up a connection's thread polls beside its sockets (an eventfd), so
// that another thread can have it look at its work again: the subscriber's
// and the master watch's threads.

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

namespace dlock::detail {

class WakeFd {
 public:
  // Throws std::system_error naming `owner` when no eventfd can be had.
  explicit WakeFd(const std::string& owner) : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), owner + ": eventfd");
  }
  ~WakeFd() { ::close(fd_); }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  int fd() const { return fd_; }

  // From any thread. A full counter still leaves the eventfd readable, so a failed write loses nothing.
  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto written = ::write(fd_, &one, sizeof one);
  }

  // By the polling thread, once poll() said it is readable.
  void drain() const {
    std::uint64_t count = 0;
    [[maybe_unused]] auto read_bytes = ::read(fd_, &count, sizeof count);
  }

 private:
  const int fd_;
};

}  // namespace dlock::detail
