// `dlock status`: each key's lock read in one atomic step (as a majority agrees over a
// Redlock), its holder named, and the key's read-write lock and semaphore after it.
#include "status_command.hpp"

#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_config.hpp"
#include "dlock/detail/inspection_scripts.hpp"
#include "dlock/detail/lock_reading.hpp"
#include "dlock/detail/shared_reading.hpp"
#include "cli_options.hpp"
#include "dlock/factory.hpp"
#include "exit_codes.hpp"
#include "holders.hpp"
#include "json.hpp"
#include "shared_status.hpp"

namespace dlock::cli {

const char* const kStatusUsage =
    "usage: dlock status KEY... [--config FILE [--section NAME]] [--json]\n"
    "Shows for each lock KEY whether it is held, by which service (host, pid) since when, its owner\n"
    "token, the hold count (re-entry depth), the remaining lease and the last fencing token; for a\n"
    "free lock, the name and server it was looked for at (check lock.key_prefix if you expected it\n"
    "held). Only reads Redis: each lock in one atomic step (a script: SCRIPT LOAD, EVALSHA running\n"
    "HGETALL, PTTL, GET), then the holder's registry entry (GET). Where KEY also names a read-write\n"
    "lock or a semaphore, a line for each follows: its writer and readers, or its permits held of how\n"
    "many and by whom (a second script reads both at once).\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME  read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                  for a service's own file that holds dlock's settings under it\n"
    "  --json          print one JSON array of objects {key, held, owner, hold_count, host, pid, since,\n"
    "                  service_started, lease_ms, fencing_token, owners: [{token, hold_count, host, pid,\n"
    "                  since, service_started}], read_write: {writer, readers: [...]}, semaphore:\n"
    "                  {permits, in_use, holders: [{token, permits, ...}]}, lock_name, redis}; null\n"
    "                  where there is no value\n"
    "  -h, --help      show this help\n"
    "Exit status: 0 every key read, 76 Redis refused a read (a name holding another type, a missing\n"
    "ACL right; that key is shown as unknown, never as free), 69 Redis unreachable or not serving for\n"
    "now (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN: try again), 78 bad config, 64 bad usage.\n";

namespace {

// A key as the command shows it: its lock as read (or refused), and its read-write lock and semaphore.
struct KeyStatus {
  std::string key;
  detail::LockReading lock;
  detail::SharedReading shared;  // the read-write lock and semaphore of the same name
};

std::string json_optional(const std::optional<long long>& value) {
  return value ? std::to_string(*value) : "null";
}

std::optional<long long> lease_ms(const LockStatus& status) {
  return status.lease_left ? std::optional<long long>(status.lease_left->count()) : std::nullopt;
}

std::string to_json(const std::vector<KeyStatus>& statuses, const std::string& endpoint) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    const LockStatus& s = statuses[i].lock.status;
    const detail::Refusal& refusal = statuses[i].lock.refusal;
    const bool held = s.held();
    const bool known = !refusal;  // a refused read is neither held nor free: null
    out << (i ? ",\n " : "") << "{\"key\":" << json_string(statuses[i].key)
        << ",\"held\":" << (!known ? "null" : held ? "true" : "false")
        << ",\"owner\":" << (held ? json_string(s.holders.front().owner) : "null")
        << ",\"hold_count\":" << (held ? s.holders.front().hold_count : 0)
        << (held ? holder_json_fields(s.holders.front()) : holder_json_fields(LockHolder{}))
        << ",\"lease_ms\":" << json_optional(lease_ms(s)) << ",\"fencing_token\":" << json_optional(s.fencing_token)
        << ",\"owners\":[";
    for (std::size_t k = 0; k < s.holders.size(); ++k) {
      out << (k ? "," : "") << "{\"token\":" << json_string(s.holders[k].owner)
          << ",\"hold_count\":" << s.holders[k].hold_count << holder_json_fields(s.holders[k]) << "}";
    }
    out << "]" << shared_status_json(statuses[i].shared) << ",\"lock_name\":" << json_string(s.lock_name)
        << ",\"redis\":" << json_string(endpoint);
    if (refusal) out << ",\"error\":" << json_string(refusal.error);
    out << "}";
  }
  out << "]\n";
  return out.str();
}

std::string to_text(const KeyStatus& key_status, const std::string& endpoint, long long now_ms) {
  const LockStatus& s = key_status.lock.status;
  std::ostringstream out;
  out << key_status.key << ": ";
  if (key_status.lock.refusal) return out.str() + "unknown; " + key_status.lock.refusal.error;
  if (!s.held()) {
    out << "free (no lock " << s.lock_name << " on redis " << endpoint << ")";
  } else {
    for (std::size_t k = 0; k < s.holders.size(); ++k) {
      out << (k ? "; also " : "held by ") << holder_text(s.holders[k], now_ms) << ", owner " << s.holders[k].owner
          << " (hold count " << s.holders[k].hold_count << ")";
    }
    out << ", lease "
        << (s.lease_left ? std::to_string(s.lease_left->count()) + "ms left" : std::string("without expiry"));
  }
  out << ", fencing token " << (s.fencing_token ? std::to_string(*s.fencing_token) : std::string("none"));
  return out.str();
}

}  // namespace

int status_command(std::span<char* const> args) {
  const ParsedArgs parsed = parse_args(args, OptionSpec{kConfigOptions, {"--json"}, std::nullopt});
  if (parsed.help) {
    std::cout << kStatusUsage;
    return kExitOk;
  }
  if (parsed.positionals.empty()) throw UsageError("status needs at least one KEY");

  const Config config = resolve_config(parsed);
  const auto redis_executor = make_executor(config.redis);
  RedisExecutor& redis = *redis_executor;
  detail::NodeScript script(redis, detail::kLockStatusScript.source, "read a lock's status");
  // A Redlock offers neither read-write locks nor semaphores: nothing there to look for.
  std::optional<detail::LoadedScript> shared_script;
  if (!script.quorum()) {
    shared_script.emplace(redis, detail::kSharedStatusScript.source,
                          "read a read-write lock's and a semaphore's status");
  }
  detail::HolderDirectory holders(redis, config.lock.key_prefix);

  std::vector<KeyStatus> statuses;
  bool any_refusal = false;  // a "no": exit 76
  bool any_not_now = false;  // only "not now"s: exit 69, try again
  for (const auto& key : parsed.positionals) {
    statuses.push_back({key, detail::read_lock_status(script, holders, redis.endpoint(), config.lock, key), {}});
    KeyStatus& status = statuses.back();
    if (shared_script) {
      status.shared = detail::read_shared_status(*shared_script, holders, redis.endpoint(), config.lock, key);
    }
    for (const detail::Refusal* refusal :
         {&status.lock.refusal, &status.shared.read_write.refusal, &status.shared.semaphore.refusal}) {
      any_refusal = any_refusal || (*refusal && !refusal->for_now);
      any_not_now = any_not_now || (*refusal && refusal->for_now);
    }
  }
  if (parsed.has("--json")) {
    std::cout << to_json(statuses, redis.endpoint());
  } else {
    const long long now_ms = now_unix_ms();
    for (const auto& status : statuses) {
      std::cout << to_text(status, redis.endpoint(), now_ms) << "\n"
                << shared_status_text(status.key, status.shared, now_ms);
    }
  }
  return any_refusal ? kExitRedisError : any_not_now ? kExitUnavailable : kExitOk;
}

}  // namespace dlock::cli
