// `dlock unlock --force`: a lock, a read-write lock or a semaphore's holders removed whoever
// they are (by a majority's account over a Redlock), their line woken, and each removal
// printed and logged at warn.
#include "unlock_command.hpp"

#include <iostream>
#include <string>

#include "cli_config.hpp"
#include "cli_options.hpp"
#include "dlock/errors.hpp"
#include "dlock/factory.hpp"
#include "dlock/logging.hpp"
#include "exit_codes.hpp"
#include "dlock/detail/forced_unlock.hpp"
#include "lock_names.hpp"
#include "dlock/detail/shared_unlock.hpp"

namespace dlock::cli {

const char* const kUnlockUsage =
    "usage: dlock unlock --force KEY [--read-write | --semaphore [--owner TOKEN]] [--config FILE [--section NAME]]\n"
    "Deletes the lock KEY whoever holds it and hands it to the oldest waiter in line, woken at once.\n"
    "The holder is not told at once: its watchdog finds the lock gone at its next renewal and reports\n"
    "it lost. Logged at warn level with the owner token(s) removed. Over a Redlock it is done on\n"
    "every node that answers, and an owner counts as removed where a majority of the nodes held it.\n"
    "  --force         required: confirms that you mean to break another owner's lock\n"
    "  --read-write    break KEY's read-write lock instead: its writer and every reader\n"
    "  --semaphore     return the permits of the semaphore KEY instead: every holder's (its count stays)\n"
    "  --owner TOKEN   with --read-write or --semaphore: only that holder's (a token `dlock list` shows),\n"
    "                  e.g. the permits of a holder that died with a long lease\n"
    "  --config FILE   dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                  with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME  read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                  for a service's own file that holds dlock's settings under it\n"
    "  -h, --help      show this help\n"
    "The waiters of a read-write lock or semaphore are woken as a release wakes them and try again in\n"
    "arrival order. Exit status: 0 removed, 1 nothing held (by TOKEN), 76 Redis refused (a name\n"
    "holding another type, a missing ACL right, a read-only replica), 69 Redis unreachable or not\n"
    "serving for now (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN), or too few of a Redlock's nodes\n"
    "answered: try again; 78 bad config, 64 bad usage.\n";

namespace {

// What was removed, on stdout and in the log.
void tell(spdlog::logger& logger, const std::string& name, const std::string& line) {
  logger.warn("forced unlock of {}: {}; that holder no longer holds it", name, line);
}

int unlock_lock(RedisExecutor& redis, spdlog::logger& logger, const LockConfig& config, const std::string& key) {
  const std::string name = lock_names(config, key).lock;
  const ForcedUnlock done = detail::force_unlock(redis, config, key);
  const std::string of_nodes = " of " + std::to_string(done.nodes) + " nodes";
  const std::size_t silent = done.nodes - done.answered;
  bool removed = false;
  for (const RemovedOwner& owner : done.owners) {
    const std::string what = owner.owner + " (hold count " + std::to_string(owner.hold_count) + ")" +
                             (done.quorum() ? " on " + std::to_string(owner.nodes) + of_nodes : "");
    if (done.may_have_held(owner)) {
      removed = true;
      // Short of a majority only for want of answers: its holder may have had the lock, and no longer has.
      const std::string unsure =
          done.held_on_majority(owner) ? "" : "; " + std::to_string(silent) + " did not answer and may hold it still";
      tell(logger, name, "removed owner " + what + unsure);
      std::cout << key << ": unlocked; removed owner " << what << unsure << "\n";
    } else {
      tell(logger, name, "removed a grant no majority held, of " + what);
      std::cout << key << ": removed a grant no majority of the nodes held (not the lock's holder), of " << what
                << "\n";
    }
  }
  if (!done.majority_answered()) {
    throw ConnectionError("redlock: only " + std::to_string(done.answered) + of_nodes + " answered the forced unlock "
                          "of " + name + "; it was done on those; run it again once a majority of the nodes answer");
  }
  if (removed) return kExitOk;
  std::cerr << "dlock: " << key << " is not held" << (done.quorum() ? " by a majority of the nodes" : "")
            << "; nothing to unlock\n";
  return kExitFailure;
}

int unlock_holders(RedisExecutor& redis, spdlog::logger& logger, const LockConfig& config, const std::string& key,
                   detail::SharedPart part, const std::string& owner) {
  const bool read_write = part == detail::SharedPart::read_write;
  const std::string label = key + (read_write ? " (read-write)" : " (semaphore)");
  const std::string name = config.key_prefix + "{" + key + "}" + (read_write ? ":rw" : ":semaphore");
  const std::vector<RemovedHolder> removed = detail::force_release_holders(redis, config, key, part, owner);
  for (const RemovedHolder& holder : removed) {
    const std::string count = read_write ? "hold count " + std::to_string(holder.count)
                                         : std::to_string(holder.count) + (holder.count == 1 ? " permit" : " permits");
    const std::string what = std::string(!read_write ? "holder " : holder.writer ? "writer " : "reader ") +
                             holder.owner + " (" + count + ")";
    tell(logger, name, "removed " + what);
    std::cout << label << ": " << (read_write ? "unlocked" : "permits returned") << "; removed " << what << "\n";
  }
  if (!removed.empty()) return kExitOk;
  std::cerr << "dlock: " << label << " is not held" << (owner.empty() ? "" : " by " + owner) << "; nothing to unlock\n";
  return kExitFailure;
}

}  // namespace

int unlock_command(std::span<char* const> args) {
  OptionSpec spec{kConfigOptions, {"--force", "--read-write", "--semaphore"}, std::nullopt};
  spec.valued.insert("--owner");
  const ParsedArgs parsed = parse_args(args, spec);
  if (parsed.help) {
    std::cout << kUnlockUsage;
    return kExitOk;
  }
  if (parsed.positionals.size() != 1) throw UsageError("unlock needs exactly one KEY");
  if (!parsed.has("--force")) throw UsageError("unlock breaks another owner's lock; say so with --force");
  if (parsed.has("--read-write") && parsed.has("--semaphore")) {
    throw UsageError("--read-write and --semaphore: pass one of them (run unlock once for each)");
  }
  const bool shared = parsed.has("--read-write") || parsed.has("--semaphore");
  const std::string owner = parsed.value("--owner").value_or("");
  if (parsed.value("--owner") && (owner.empty() || !shared)) {
    throw UsageError("--owner TOKEN picks one holder of a read-write lock (--read-write) or a semaphore "
                     "(--semaphore); a lock is broken whole, whoever holds it");
  }
  const std::string& key = parsed.positionals.front();

  const Config config = resolve_config(parsed);
  auto logger = make_logger(config.logging);
  const auto redis_executor = make_executor(config.redis);
  RedisExecutor& redis = *redis_executor;
  if (!shared) return unlock_lock(redis, *logger, config.lock, key);
  if (!redis.quorum_nodes().empty()) {
    throw UsageError("--read-write and --semaphore: a Redlock (redis.mode: redlock) offers neither read-write locks "
                     "nor semaphores, so there is none to break");
  }
  const detail::SharedPart part =
      parsed.has("--read-write") ? detail::SharedPart::read_write : detail::SharedPart::semaphore;
  return unlock_holders(redis, *logger, config.lock, key, part, owner);
}

}  // namespace dlock::cli
