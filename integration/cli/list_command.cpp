// `dlock list`: the locks, read-write locks and semaphores found by SCAN on every master,
// read (by a majority over a Redlock), and printed as a table or one JSON array.
#include "list_command.hpp"

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli_config.hpp"
#include "cli_options.hpp"
#include "dlock/detail/inspection_scripts.hpp"
#include "dlock/factory.hpp"
#include "exit_codes.hpp"
#include "holders.hpp"
#include "list_output.hpp"
#include "list_rows.hpp"
#include "list_scan.hpp"

namespace dlock::cli {

const char* const kListUsage =
    "usage: dlock list [PATTERN] [--config FILE [--section NAME]] [--json]\n"
    "Lists what is held under the config's lock.key_prefix whose KEY matches PATTERN (a Redis glob:\n"
    "*, ?, [abc], \\ escapes; default *): each lock, each writer and reader of a read-write lock, each\n"
    "holder of a semaphore's permits, with the holder (host, pid, since when), hold count (or permits\n"
    "held, of how many), lease left, waiters in line and fencing token. Only reads Redis: SCAN (never\n"
    "KEYS) finds them, then HGETALL, PTTL, ZCARD and GET read each lock (not in one atomic step: a lock\n"
    "released meanwhile is left out), the status script each read-write lock and semaphore, and GET each\n"
    "holder's registry entry. Over a Redlock a lock is listed where a majority of the nodes hold it, as\n"
    "unknown where no majority agrees (exit 69). When nothing is held it says which prefix and server\n"
    "it searched: a service with another lock.key_prefix keeps its locks elsewhere.\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME  read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                  for a service's own file that holds dlock's settings under it\n"
    "  --json          print one JSON array of objects {key, kind (lock, write, read, semaphore), owner,\n"
    "                  hold_count, host, pid, since, service_started, lease_ms, waiters, fencing_token,\n"
    "                  permits, lock_name, and error where unknown}; null where there is no value\n"
    "  -h, --help      show this help\n"
    "Exit status: 0 listed (also when nothing is held), 76 Redis refused (a missing ACL right such as\n"
    "+scan or +zcard), 69 Redis unreachable or not serving for now (LOADING, BUSY, MASTERDOWN,\n"
    "TRYAGAIN, CLUSTERDOWN), or a lock no majority of a Redlock's nodes agree on: try again; 78 bad\n"
    "config, 64 bad usage.\n";

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
  detail::HolderDirectory holders(redis, config.lock.key_prefix);
  const std::string& prefix = config.lock.key_prefix;
  const FoundNames found = scan_names(redis, prefix, pattern);
  std::vector<ListRow> rows = lock_rows(redis, holders, prefix, found.locks);
  // A Redlock offers neither read-write locks nor semaphores: what its nodes hold of them is no one's.
  if (redis.quorum_nodes().empty() && !(found.read_write.empty() && found.semaphores.empty())) {
    detail::LoadedScript script(redis, detail::kSharedStatusScript.source,
                                "read a read-write lock's and a semaphore's holders");
    std::set<std::string> keys = found.read_write;
    keys.insert(found.semaphores.begin(), found.semaphores.end());
    std::vector<ListRow> shared = shared_rows(script, holders, redis.endpoint(), config.lock, keys);
    rows.insert(rows.end(), shared.begin(), shared.end());
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ListRow& a, const ListRow& b) { return a.key < b.key; });
  const bool any_unknown = std::any_of(rows.begin(), rows.end(), [](const ListRow& r) { return !r.error.empty(); });
  const int status = any_unknown ? kExitUnavailable : kExitOk;

  const std::string searched = "under prefix '" + prefix + "'" + (pattern == "*" ? "" : " matching '" + pattern + "'") +
                               " on redis " + redis.endpoint();
  if (parsed.has("--json")) {
    std::cout << list_json(rows);
    if (rows.empty()) std::cerr << "dlock: no locks held " << searched << "\n";
    return status;
  }
  if (rows.empty()) {
    std::cout << "no locks held " << searched
              << "; a service with another lock.key_prefix keeps its locks there: pass its config with --config\n";
    return status;
  }
  const std::string held = held_summary(rows);
  std::cout << list_table(rows, now_unix_ms()) << (held.empty() ? "no locks" : held) << " held " << searched
            << (any_unknown ? "; some are unknown (above): try again" : "") << "\n";
  return status;
}

}  // namespace dlock::cli
