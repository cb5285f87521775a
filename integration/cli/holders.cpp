// Who holds a lock, as the CLI prints it: host and pid from the holder's registry entry,
// since when from its acquisition id, as a line of text or as JSON fields.
#include "holders.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "json.hpp"

namespace dlock::cli {
namespace {

// 42s, 3m12s, 2h13m, 5d4h: how long, to the unit an operator cares about.
std::string duration_text(long long ms) {
  const long long s = std::max(ms, 0LL) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h" + std::to_string(s / 60 % 60) + "m";
  return std::to_string(s / 86400) + "d" + std::to_string(s / 3600 % 24) + "h";
}

}  // namespace

long long now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utc_timestamp(long long unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm parts{};
  ::gmtime_r(&seconds, &parts);
  char text[96];  // room for any int the compiler can imagine, so no truncation warning
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1,
                parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, static_cast<int>(unix_ms % 1000));
  return text;
}

std::string holder_text(const LockHolder& holder, long long now_unix_ms) {
  if (!holder.service) return "a service with no registry entry (stopped, crashed, or not allowed to write one)";
  std::string text = "pid " + std::to_string(holder.service->pid) + " on " + holder.service->host;
  if (holder.since_unix_ms) {
    text += " since " + utc_timestamp(*holder.since_unix_ms) + " (for " +
            duration_text(now_unix_ms - *holder.since_unix_ms) + ")";
  }
  return text;
}

std::string holder_json_fields(const LockHolder& holder) {
  const auto& service = holder.service;
  return ",\"host\":" + (service ? json_string(service->host) : std::string("null")) +
         ",\"pid\":" + (service ? std::to_string(service->pid) : std::string("null")) +
         ",\"since\":" + (holder.since_unix_ms ? json_string(utc_timestamp(*holder.since_unix_ms)) : "null") +
         ",\"service_started\":" + (service ? json_string(utc_timestamp(service->started_unix_ms)) : "null");
}

}  // namespace dlock::cli
