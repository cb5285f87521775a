#pragma once
// An acquisition id, the field of a hold in its lock's hash:
// "<instance>:<thread>:<n>", with <instance> 32 and <thread> 16 hex digits
// (owner_token.hpp) and <n> in hex. <n> numbers the service's acquisitions
// by the microseconds since the service started, made strictly increasing:
// unique within the service, as a counter would be, and it tells an
// operator when that acquisition's lock() call began, with the service's
// start time from its registry entry (instance_registry.hpp), at no cost
// in Redis.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/owner.hpp"

namespace dlock::detail {

struct AcquisitionId {
  std::string_view instance;  // the service's 32 hex digits
  std::string_view thread;    // the owner's 16 hex digits (a thread's, or an Owner's)
  std::uint64_t micros_since_start = 0;
};

// "<owner>:<n in hex>", where `owner` is "<instance>:<thread>".
std::string format_acquisition_id(std::string_view owner, std::uint64_t micros_since_start);

// The parts of an id, or nothing if `id` is not one (another program's field, an older format).
std::optional<AcquisitionId> parse_acquisition_id(std::string_view id);

// The owner whose acquisition `id` is (its middle part); `id` is one this
// process formatted, so it always parses.
Owner owner_of_acquisition(std::string_view id);

// Draws the numbers of one service's acquisitions. Thread-safe.
class AcquisitionClock {
 public:
  using Clock = std::chrono::steady_clock;
  AcquisitionClock();
  // Microseconds since construction, greater than every number drawn before.
  std::uint64_t next();
  // When it was made, in ms since the Unix epoch: number 0's wall-clock time.
  long long started_unix_ms() const { return started_unix_ms_; }

 private:
  const Clock::time_point started_;
  const long long started_unix_ms_;
  std::atomic<std::uint64_t> last_{0};  // atomic: the greatest number drawn so far
};

}  // namespace dlock::detail
