#include "dlock/owner_token.hpp"

#include <pthread.h>
#include <sys/random.h>

#include <array>
#include <atomic>
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

namespace {
std::atomic<unsigned> g_forks{0};
void count_fork() { g_forks.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

unsigned fork_generation() {
  // Registered by the first call, which a service makes when it is created: before any fork that matters.
  static const bool registered = ::pthread_atfork(nullptr, nullptr, &count_fork) == 0;
  (void)registered;
  return g_forks.load(std::memory_order_relaxed);
}

}  // namespace dlock::detail
