// Acquisition ids ("<instance>:<thread>:<n>"): written, read back, and the clock that
// draws each <n> as microseconds since the service started, strictly increasing.
#include "dlock/detail/acquisition_id.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::detail {
namespace {

constexpr std::size_t kInstanceDigits = 32;
constexpr std::size_t kThreadDigits = 16;

bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

}  // namespace

std::string format_acquisition_id(std::string_view owner, std::uint64_t micros_since_start) {
  char digits[17];
  const auto [end, ec] = std::to_chars(std::begin(digits), std::end(digits), micros_since_start, 16);
  (void)ec;  // 16 hex digits always fit
  std::string id;
  id.reserve(owner.size() + 1 + static_cast<std::size_t>(end - digits));
  return id.append(owner).append(1, ':').append(digits, end);
}

std::optional<AcquisitionId> parse_acquisition_id(std::string_view id) {
  if (id.size() < kInstanceDigits + 1 + kThreadDigits + 2) return std::nullopt;
  const std::string_view instance = id.substr(0, kInstanceDigits);
  const std::string_view thread = id.substr(kInstanceDigits + 1, kThreadDigits);
  const std::string_view number = id.substr(kInstanceDigits + 1 + kThreadDigits + 1);
  if (id[kInstanceDigits] != ':' || id[kInstanceDigits + 1 + kThreadDigits] != ':' || !is_hex(instance) ||
      !is_hex(thread) || !is_hex(number) || number.size() > 16) {
    return std::nullopt;
  }
  AcquisitionId parsed{instance, thread, 0};
  std::from_chars(number.data(), number.data() + number.size(), parsed.micros_since_start, 16);
  return parsed;
}

struct OwnerAccess {
  static Owner make(std::uint64_t value) { return Owner(value); }
};

Owner owner_of_acquisition(std::string_view id) {
  std::uint64_t value = 0;
  if (const std::optional<AcquisitionId> parsed = parse_acquisition_id(id)) {
    std::from_chars(parsed->thread.data(), parsed->thread.data() + parsed->thread.size(), value, 16);
  }
  return OwnerAccess::make(value);
}

AcquisitionClock::AcquisitionClock()
    : started_(Clock::now()),
      started_unix_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) {}

std::uint64_t AcquisitionClock::next() {
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_).count();
  const auto now = static_cast<std::uint64_t>(std::max<long long>(elapsed, 0));
  std::uint64_t seen = last_.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    next = std::max(now, seen + 1);
  } while (!last_.compare_exchange_weak(seen, next, std::memory_order_relaxed));
  return next;
}

}  // namespace dlock::detail
