// The random parts of an owner token, drawn from getrandom as hex: 128 bits per
// service instance, and 64 per owner: a thread's drawn on its first use, a
// task's by Owner::create().
#include "dlock/owner_token.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ostream>

#include "dlock/errors.hpp"
#include "dlock/owner.hpp"

namespace dlock {
namespace detail {
namespace {

template <std::size_t N>
std::array<unsigned char, N> random_bytes() {
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
  return bytes;
}

constexpr char kDigits[] = "0123456789abcdef";

std::uint64_t random_owner_value() {
  std::uint64_t value = 0;
  for (unsigned char b : random_bytes<8>()) value = (value << 8) | b;
  return value;
}

std::uint64_t current_thread_owner_value() {
  thread_local const std::uint64_t value = random_owner_value();
  return value;
}

}  // namespace

std::string random_instance_id() {
  std::string hex;
  hex.reserve(32);
  for (unsigned char b : random_bytes<16>()) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

std::string owner_hex(std::uint64_t value) {
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) hex[static_cast<std::size_t>(i)] = kDigits[value & 0xf];
  return hex;
}

const std::string& current_thread_id() {
  thread_local const std::string id = owner_hex(current_thread_owner_value());
  return id;
}

}  // namespace detail

Owner Owner::create() { return Owner(detail::random_owner_value()); }

Owner Owner::current_thread() { return Owner(detail::current_thread_owner_value()); }

std::string Owner::str() const { return detail::owner_hex(value_); }

std::ostream& operator<<(std::ostream& out, Owner owner) { return out << owner.str(); }

}  // namespace dlock
