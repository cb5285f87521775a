// The instance registry's entry: its key and its "host= pid= started_ms=" text read
// both ways, and the SET, refresh and DEL that keep it in Redis (failures only logged).
#include "dlock/detail/instance_registry.hpp"

#include <unistd.h>

#include <charconv>
#include <climits>
#include <vector>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// A host name as one word: anything but printable, non-space ASCII becomes '?'.
std::string one_word(std::string_view text) {
  std::string word(text.substr(0, 255));
  for (char& c : word) {
    if (c <= ' ' || c > '~') c = '?';
  }
  return word.empty() ? "?" : word;
}

std::optional<long long> number(std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string instance_key(std::string_view prefix, std::string_view instance_id) {
  return std::string(prefix).append("instance:").append(instance_id);
}

std::string encode_instance(const InstanceEntry& entry) {
  return "host=" + one_word(entry.host) + " pid=" + std::to_string(entry.pid) +
         " started_ms=" + std::to_string(entry.started_unix_ms);
}

std::optional<InstanceEntry> decode_instance(std::string_view text) {
  std::optional<std::string> host;
  std::optional<long long> pid, started;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    const std::size_t equals = word.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view name = word.substr(0, equals), value = word.substr(equals + 1);
    if (name == "host") host = std::string(value);
    if (name == "pid") pid = number(value);
    if (name == "started_ms") started = number(value);
    // Any other name is one a later version added: skipped.
  }
  if (!host || !pid || !started) return std::nullopt;
  return InstanceEntry{*host, *pid, *started};
}

InstanceEntry this_process(long long started_unix_ms) {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  return {one_word(name), static_cast<long long>(::getpid()), started_unix_ms};
}

InstanceRegistry::InstanceRegistry(std::shared_ptr<RedisExecutor> redis, std::string key, const InstanceEntry& entry,
                                   Millis period, std::shared_ptr<spdlog::logger> logger)
    : redis_(std::move(redis)), key_(std::move(key)), value_(encode_instance(entry)), period_(period),
      logger_(std::move(logger)) {}

std::vector<std::string> InstanceRegistry::write_command() const {
  return {"SET", key_, value_, "PX", std::to_string(3 * period_.count())};
}

bool InstanceRegistry::enter() {
  std::string failure;
  try {
    const RedisReply reply = redis_->command(write_command());
    if (!reply.is_error()) return true;
    failure = "Redis refused it: " + reply.str;
  } catch (const Error& e) {
    failure = e.what();
  }
  logger_->warn("could not write this service's registry entry {} ({}); locks work as usual, but dlock status and "
                "dlock list cannot name the host and pid holding them. The Redis user needs SET and DEL on keys "
                "with the lock prefix",
                key_, failure);
  return false;
}

void InstanceRegistry::refresh(Clock::time_point deadline) {
  try {
    const std::vector<RedisReply> replies = redis_->urgent_pipeline({write_command()}, deadline);
    if (!replies.empty() && replies.front().is_error()) {
      logger_->debug("refreshing the registry entry {} was refused: {}", key_, replies.front().str);
    }
  } catch (const Error& e) {
    logger_->debug("refreshing the registry entry {} failed: {}", key_, e.what());
  }
}

void InstanceRegistry::leave() {
  try {
    redis_->command({"DEL", key_});
  } catch (const Error& e) {
    logger_->debug("deleting the registry entry {} failed (it expires by itself): {}", key_, e.what());
  }
}

}  // namespace dlock::detail
