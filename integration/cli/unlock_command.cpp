// `dlock unlock --force`: the library's forced-release script run on one key, the turn
// handed to the oldest waiter, and every owner removed logged at warn.
#include "unlock_command.hpp"

#include <iostream>
#include <string>

#include "cli_config.hpp"
#include "cli_script.hpp"
#include "cli_options.hpp"
#include "dlock/detail/lock_names.hpp"
#include "dlock/errors.hpp"
#include "dlock/scripts.hpp"
#include "dlock/factory.hpp"
#include "dlock/logging.hpp"
#include "exit_codes.hpp"
#include "lock_names.hpp"
#include "redis_refusal.hpp"

namespace dlock::cli {

const char* const kUnlockUsage =
    "usage: dlock unlock --force KEY [--config FILE [--section NAME]]\n"
    "Deletes the lock KEY whoever holds it and hands it to the oldest waiter in line, woken at once.\n"
    "The holder is not told at once:\n"
    "its watchdog finds the lock gone at its next renewal and reports it lost. Logged at warn\n"
    "level with the owner token(s) removed.\n"
    "  --force         required: confirms that you mean to break another owner's lock\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME  read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                  for a service's own file that holds dlock's settings under it\n"
    "  -h, --help      show this help\n"
    "Exit status: 0 removed, 1 KEY was not held, 76 Redis refused (a name holding another type, a\n"
    "missing ACL right, a read-only replica), 69 Redis unreachable or not serving for now (LOADING,\n"
    "BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN: try again), 78 bad config, 64 bad usage.\n";


int unlock_command(std::span<char* const> args) {
  const ParsedArgs parsed = parse_args(args, OptionSpec{kConfigOptions, {"--force"}, std::nullopt});
  if (parsed.help) {
    std::cout << kUnlockUsage;
    return kExitOk;
  }
  if (parsed.positionals.size() != 1) throw UsageError("unlock needs exactly one KEY");
  if (!parsed.has("--force")) throw UsageError("unlock breaks another owner's lock; say so with --force");
  const std::string& key = parsed.positionals.front();

  const Config config = resolve_config(parsed);
  auto logger = make_logger(config.logging);
  const auto redis_executor = make_executor(config.redis);
  RedisExecutor& redis = *redis_executor;

  const LockNames names = lock_names(config.lock, key);
  // The library's own forced release: owners read and removed in one step, the
  // turn handed to the oldest live waiter in line, who is woken at once.
  const detail::LockNames all_names(config.lock.key_prefix, key);
  const auto keys = all_names.script_keys();
  CliScript script(redis, detail::kForceReleaseScript.source, "force an unlock");
  const RedisReply reply =
      script.run(std::vector<std::string>(keys.begin(), keys.end()), {std::to_string(config.lock.turn_window.count())});
  if (reply.is_error()) throw_refusal(redis.endpoint(), "forced unlock of " + names.lock + " failed", reply.str);
  if (reply.elements.empty()) {
    std::cerr << "dlock: " << key << " is not held; nothing to unlock\n";
    return kExitFailure;
  }
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    const std::string& owner = reply.elements[i].str;
    const std::string& holds = reply.elements[i + 1].str;
    logger->warn("forced unlock of {}: removed owner {} (hold count {}); that holder no longer holds the lock",
                 names.lock, owner, holds);
    std::cout << key << ": unlocked; removed owner " << owner << " (hold count " << holds << ")\n";
  }
  return kExitOk;
}

}  // namespace dlock::cli
