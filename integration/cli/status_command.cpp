#include "status_command.hpp"

#include <charconv>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_config.hpp"
#include "cli_script.hpp"
#include "cli_options.hpp"
#include "dlock/hiredis_executor.hpp"
#include "exit_codes.hpp"
#include "json.hpp"
#include "lock_names.hpp"
#include "redis_refusal.hpp"

namespace dlock::cli {

const char* const kStatusUsage =
    "usage: dlock status KEY... [--config FILE] [--json]\n"
    "Shows for each lock KEY whether it is held, by which owner token, the hold count (re-entry\n"
    "depth), the remaining lease and the last fencing token. Only reads Redis, each lock in one\n"
    "atomic step (a script: SCRIPT LOAD, EVALSHA running HGETALL, PTTL, GET).\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --json          print one JSON array of objects {key, held, owner, hold_count, lease_ms,\n"
    "                  fencing_token, owners: [{token, hold_count}]}; null where there is no value\n"
    "  -h, --help      show this help\n"
    "Exit status: 0 every key read, 76 Redis refused a read (a name holding another type, a missing\n"
    "ACL right; that key is shown as unknown, never as free), 69 Redis unreachable, 78 bad config,\n"
    "64 bad usage.\n";

namespace {

struct Owner {
  std::string token;
  long long hold_count = 0;
};

struct LockStatus {
  std::string key;
  std::vector<Owner> owners;               // normally zero or one
  std::optional<long long> lease_ms;       // PTTL while held; none when free or without expiry
  std::optional<long long> fencing_token;  // none if never locked
  std::string error;                       // Redis refused the read: held or free is unknown
};

// KEYS: lock hash, fencing counter. One atomic read, so a release in between
// never shows an owner without its lease. Reads only: runs on a replica too.
constexpr const char* kStatusScript = R"lua(
return {redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
)lua";

std::optional<long long> to_integer(const std::string& text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

LockStatus read_status(CliScript& script, const std::string& endpoint, const LockConfig& config,
                       const std::string& key) {
  const LockNames names = lock_names(config, key);
  const RedisReply reply = script.run({names.lock, names.fence});
  LockStatus status;
  status.key = key;
  if (reply.is_error() || reply.elements.size() != 3) {
    status.error = describe_refusal(endpoint, "cannot read " + names.lock,
                                    reply.is_error() ? reply.str : std::string("an unexpected reply"));
    return status;
  }
  const RedisReply& hash = reply.elements[0];
  for (std::size_t i = 0; i + 1 < hash.elements.size(); i += 2) {
    status.owners.push_back({hash.elements[i].str, to_integer(hash.elements[i + 1].str).value_or(0)});
  }
  if (!status.owners.empty() && reply.elements[1].integer >= 0) status.lease_ms = reply.elements[1].integer;
  const RedisReply& fence = reply.elements[2];
  if (!fence.is_nil()) {
    status.fencing_token = to_integer(fence.str);
    if (!status.fencing_token) {
      status.error = "redis " + endpoint + ": " + names.fence + " is not a fencing counter; another program uses "
                     "that name: delete it or choose another lock.key_prefix";
    }
  }
  return status;
}

std::string json_optional(const std::optional<long long>& value) {
  return value ? std::to_string(*value) : "null";
}

std::string to_json(const std::vector<LockStatus>& statuses) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    const LockStatus& s = statuses[i];
    const bool held = !s.owners.empty();
    const bool known = s.error.empty();  // a refused read is neither held nor free: null
    out << (i ? ",\n " : "") << "{\"key\":" << json_string(s.key)
        << ",\"held\":" << (!known ? "null" : held ? "true" : "false")
        << ",\"owner\":" << (held ? json_string(s.owners.front().token) : "null")
        << ",\"hold_count\":" << (held ? s.owners.front().hold_count : 0)
        << ",\"lease_ms\":" << json_optional(s.lease_ms) << ",\"fencing_token\":" << json_optional(s.fencing_token)
        << ",\"owners\":[";
    for (std::size_t k = 0; k < s.owners.size(); ++k) {
      out << (k ? "," : "") << "{\"token\":" << json_string(s.owners[k].token)
          << ",\"hold_count\":" << s.owners[k].hold_count << "}";
    }
    out << "]";
    if (!s.error.empty()) out << ",\"error\":" << json_string(s.error);
    out << "}";
  }
  out << "]\n";
  return out.str();
}

std::string to_text(const LockStatus& s) {
  std::ostringstream out;
  out << s.key << ": ";
  if (!s.error.empty()) return out.str() + "unknown; " + s.error;
  if (s.owners.empty()) {
    out << "free";
  } else {
    for (std::size_t k = 0; k < s.owners.size(); ++k) {
      out << (k ? ", " : "held by ") << s.owners[k].token << " (hold count " << s.owners[k].hold_count << ")";
    }
    out << ", lease " << (s.lease_ms ? std::to_string(*s.lease_ms) + "ms left" : std::string("without expiry"));
  }
  out << ", fencing token " << (s.fencing_token ? std::to_string(*s.fencing_token) : std::string("none"));
  return out.str();
}

}  // namespace

int status_command(std::span<char* const> args) {
  const ParsedArgs parsed = parse_args(args, OptionSpec{{"--config"}, {"--json"}, std::nullopt});
  if (parsed.help) {
    std::cout << kStatusUsage;
    return kExitOk;
  }
  if (parsed.positionals.empty()) throw UsageError("status needs at least one KEY");

  const Config config = resolve_config(parsed.value("--config"));
  HiredisExecutor redis(config.redis);
  redis.connect();
  CliScript script(redis, kStatusScript, "read a lock's status");

  std::vector<LockStatus> statuses;
  bool any_error = false;
  for (const auto& key : parsed.positionals) {
    statuses.push_back(read_status(script, redis.endpoint(), config.lock, key));
    any_error = any_error || !statuses.back().error.empty();
  }
  if (parsed.has("--json")) {
    std::cout << to_json(statuses);
  } else {
    for (const auto& status : statuses) std::cout << to_text(status) << "\n";
  }
  return any_error ? kExitRedisError : kExitOk;
}

}  // namespace dlock::cli
