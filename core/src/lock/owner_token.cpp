// The random parts of an owner token, drawn from getrandom as hex: 128 bits per
// service instance, and 64 per thread, drawn on the thread's first use.
#include "dlock/owner_token.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

template <std::size_t N>
std::string random_hex() {
  std::array<unsigned char, N> bytes{};
  std::size_t filled = 0;
  while (filled < N) {
    ssize_t got = ::getrandom(bytes.data() + filled, N - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("cannot draw an owner token from the OS random source: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * N);
  for (unsigned char b : bytes) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

}  // namespace

std::string random_instance_id() { return random_hex<16>(); }

const std::string& current_thread_id() {
  thread_local const std::string id = random_hex<8>();
  return id;
}

}  // namespace dlock::detail
