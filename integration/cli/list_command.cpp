// `dlock list`: the lock hashes found by SCAN on every master, read a batch per round trip
// (HGETALL, PTTL, ZCARD, GET), and printed as a table or one JSON array.
#include "list_command.hpp"

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_config.hpp"
#include "cli_options.hpp"
#include "dlock/detail/key_label.hpp"
#include "dlock/factory.hpp"
#include "exit_codes.hpp"
#include "holders.hpp"
#include "json.hpp"
#include "lock_names.hpp"
#include "redis_refusal.hpp"
#include "reply_integer.hpp"

namespace dlock::cli {

const char* const kListUsage =
    "usage: dlock list [PATTERN] [--config FILE [--section NAME]] [--json]\n"
    "Lists the locks held under the config's lock.key_prefix whose KEY matches PATTERN (a Redis glob:\n"
    "*, ?, [abc], \\ escapes; default *): key, holder (host, pid, since when), hold count, lease left,\n"
    "waiters in line and fencing token. Only reads Redis: SCAN (never KEYS) finds the locks, then\n"
    "HGETALL, PTTL, ZCARD and GET read each (not in one atomic step: a lock released meanwhile is left\n"
    "out), and GET each holder's registry entry. When nothing is held it says which prefix and server\n"
    "it searched: a service with another lock.key_prefix keeps its locks elsewhere.\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME  read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                  for a service's own file that holds dlock's settings under it\n"
    "  --json          print one JSON array of objects {key, owner, hold_count, host, pid, since,\n"
    "                  service_started, lease_ms, waiters, fencing_token, lock_name}; null where\n"
    "                  there is no value\n"
    "  -h, --help      show this help\n"
    "Exit status: 0 listed (also when nothing is held), 76 Redis refused (a missing ACL right such as\n"
    "+scan or +zcard), 69 Redis unreachable or not serving for now (LOADING, BUSY, MASTERDOWN,\n"
    "TRYAGAIN, CLUSTERDOWN: try again), 78 bad config, 64 bad usage.\n";

namespace {

// Locks read per round trip.
constexpr std::size_t kBatch = 100;

struct HeldLock {
  std::string key;
  std::string lock_name;
  std::vector<Holder> owners;  // normally one
  std::optional<long long> lease_ms;
  std::optional<long long> waiters;
  std::optional<long long> fencing_token;
};

// `text` matched literally by a Redis glob.
std::string glob_literal(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The names of the lock hashes matching `pattern`, each once, in key order.
std::vector<std::string> scan_locks(RedisExecutor& redis, const std::string& prefix, const std::string& pattern) {
  const std::string match = glob_literal(prefix) + "{" + pattern + "}";
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const RedisReply reply = redis.command({"SCAN", cursor, "MATCH", match, "COUNT", "1000", "TYPE", "hash"});
    if (reply.is_error()) throw_refusal(redis.endpoint(), "cannot list the locks (SCAN)", reply.str);
    if (reply.elements.size() != 2) throw_refusal(redis.endpoint(), "cannot list the locks (SCAN)", "an unexpected reply");
    cursor = reply.elements[0].str;
    for (const RedisReply& name : reply.elements[1].elements) names.push_back(name.str);
  } while (cursor != "0");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());  // SCAN may return a name twice
  return names;
}

// Reads the locks named `names` (P{K}), a batch per round trip; leaves out those released meanwhile.
std::vector<HeldLock> read_locks(RedisExecutor& redis, HolderDirectory& holders, const std::string& prefix,
                                 const std::vector<std::string>& names) {
  std::vector<HeldLock> locks;
  for (std::size_t first = 0; first < names.size(); first += kBatch) {
    const std::size_t last = std::min(names.size(), first + kBatch);
    std::vector<RedisCommand> commands;
    for (std::size_t i = first; i < last; ++i) {
      const std::string& name = names[i];
      commands.push_back({"HGETALL", name});
      commands.push_back({"PTTL", name});
      commands.push_back({"ZCARD", name + ":queue"});
      commands.push_back({"GET", name + ":fence"});
    }
    const std::vector<RedisReply> replies = redis.pipeline(commands);
    for (std::size_t i = first; i < last; ++i) {
      const RedisReply* reply = &replies[4 * (i - first)];
      if (reply[0].is_error()) throw_refusal(redis.endpoint(), "cannot read " + names[i], reply[0].str);
      if (reply[0].elements.empty()) continue;  // released since the scan
      HeldLock lock;
      lock.lock_name = names[i];
      lock.key = names[i].substr(prefix.size() + 1, names[i].size() - prefix.size() - 2);
      for (std::size_t k = 0; k + 1 < reply[0].elements.size(); k += 2) {
        const RedisReply& count = reply[0].elements[k + 1];
        lock.owners.push_back(holders.holder(reply[0].elements[k].str, integer_of(count).value_or(0)));
      }
      if (const auto pttl = integer_of(reply[1]); pttl && *pttl >= 0) lock.lease_ms = pttl;
      lock.waiters = integer_of(reply[2]);
      if (!reply[3].is_nil()) lock.fencing_token = integer_of(reply[3]);
      locks.push_back(std::move(lock));
    }
  }
  return locks;
}

std::string json_number(const std::optional<long long>& value) { return value ? std::to_string(*value) : "null"; }

std::string to_json(const std::vector<HeldLock>& locks) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < locks.size(); ++i) {
    const HeldLock& lock = locks[i];
    const Holder& holder = lock.owners.front();
    out << (i ? ",\n " : "") << "{\"key\":" << json_string(lock.key) << ",\"owner\":" << json_string(holder.owner)
        << ",\"hold_count\":" << holder.hold_count << holder_json_fields(holder)
        << ",\"lease_ms\":" << json_number(lock.lease_ms) << ",\"waiters\":" << json_number(lock.waiters)
        << ",\"fencing_token\":" << json_number(lock.fencing_token)
        << ",\"lock_name\":" << json_string(lock.lock_name) << "}";
  }
  out << "]\n";
  return out.str();
}

std::string to_table(const std::vector<HeldLock>& locks) {
  std::vector<std::vector<std::string>> rows{{"KEY", "HELD BY", "HOLDS", "LEASE LEFT", "WAITERS", "FENCING TOKEN"}};
  const long long now_ms = now_unix_ms();
  for (const HeldLock& lock : locks) {
    const Holder& holder = lock.owners.front();
    rows.push_back({detail::printable(lock.key), holder_text(holder, now_ms), std::to_string(holder.hold_count),
                    lock.lease_ms ? std::to_string(*lock.lease_ms) + "ms" : "no expiry",
                    lock.waiters ? std::to_string(*lock.waiters) : "?",
                    lock.fencing_token ? std::to_string(*lock.fencing_token) : "none"});
  }
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
  return out.str();
}

}  // namespace

int list_command(std::span<char* const> args) {
  const ParsedArgs parsed = parse_args(args, OptionSpec{kConfigOptions, {"--json"}, std::nullopt});
  if (parsed.help) {
    std::cout << kListUsage;
    return kExitOk;
  }
  if (parsed.positionals.size() > 1) throw UsageError("list takes at most one PATTERN");
  const std::string pattern = parsed.positionals.empty() ? "*" : parsed.positionals.front();

  const Config config = resolve_config(parsed);
  const auto redis_executor = make_executor(config.redis);
  RedisExecutor& redis = *redis_executor;
  HolderDirectory holders(redis, config.lock.key_prefix);
  const std::string& prefix = config.lock.key_prefix;
  // SCAN's cursor is per server: a cluster is scanned master by master, a Redlock node by node.
  std::vector<std::string> names;
  redis.for_each_master([&](RedisExecutor& master) {
    std::vector<std::string> found = scan_locks(master, prefix, pattern);
    names.insert(names.end(), found.begin(), found.end());
  });
  std::sort(names.begin(), names.end());
  // A Redlock's nodes each hold every lock: one line per lock.
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const std::vector<HeldLock> locks = read_locks(redis, holders, prefix, names);

  const std::string searched = "under prefix '" + prefix + "'" + (pattern == "*" ? "" : " matching '" + pattern + "'") +
                               " on redis " + redis.endpoint();
  if (parsed.has("--json")) {
    std::cout << to_json(locks);
    if (locks.empty()) std::cerr << "dlock: no locks held " << searched << "\n";
    return kExitOk;
  }
  if (locks.empty()) {
    std::cout << "no locks held " << searched
              << "; a service with another lock.key_prefix keeps its locks there: pass its config with --config\n";
    return kExitOk;
  }
  std::cout << to_table(locks) << locks.size() << (locks.size() == 1 ? " lock" : " locks") << " held " << searched
            << "\n";
  return kExitOk;
}

}  // namespace dlock::cli
