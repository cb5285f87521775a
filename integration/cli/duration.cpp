// parse_duration: 250ms, 10s, 2m, 1h or plain milliseconds, up to a year; anything else
// is a UsageError naming the option.
#include "duration.hpp"

#include <charconv>
#include <string>

#include "cli_options.hpp"

namespace dlock::cli {

namespace {

constexpr long long kMaxMillis = 365LL * 24 * 3600 * 1000;

long long unit_millis(std::string_view unit) {
  if (unit.empty() || unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 3600 * 1000;
  return 0;
}

}  // namespace

Millis parse_duration(std::string_view text, std::string_view option) {
  const auto fail = [&]() -> Millis {
    throw UsageError(std::string(option) + ": '" + std::string(text) +
                     "' is not a duration; write e.g. 250ms, 10s, 2m, 1h or a number of milliseconds");
  };
  long long number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end == text.data() || number < 0) return fail();
  const long long unit = unit_millis(text.substr(static_cast<std::size_t>(end - text.data())));
  if (unit == 0 || number > kMaxMillis / unit) return fail();
  return Millis(number * unit);
}

}  // namespace dlock::cli
