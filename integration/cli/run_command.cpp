// `dlock run`: the lock, read or write lock, or semaphore permit taken, COMMAND run while it
// is held, signals passed on, and the exit status that says how it went.
#include "run_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <string_view>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "child_process.hpp"
#include "cli_config.hpp"
#include "cli_options.hpp"
#include "duration.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "dlock/detail/inspection_scripts.hpp"
#include "dlock/detail/lock_reading.hpp"
#include "holders.hpp"
#include "replica_check.hpp"
#include "signal_forwarder.hpp"

namespace dlock::cli {

const char* const kRunUsage =
    "usage: dlock run KEY [--read | --write] [--wait DUR] [--lease DUR] [--config FILE [--section NAME]]\n"
    "                 [--kill-on-lost] -- COMMAND [ARGS...]\n"
    "       dlock run --permits NAME:N [options] -- COMMAND [ARGS...]\n"
    "Runs COMMAND while holding the distributed lock KEY, like flock(1) across hosts.\n"
    "  --read           hold KEY's read lock instead: other readers run alongside, writers wait\n"
    "  --write          hold KEY's write lock: alone, after the readers before it\n"
    "  --permits NAME:N hold one permit of the semaphore NAME instead of a lock: at most N such\n"
    "                   commands run at once (N is its count if it has none yet; set_permits changes it)\n"
    "  --wait DUR       how long to wait for a busy lock; 0 = try once (default: lock.wait_ms of the\n"
    "                   config file, 10s when it does not set it or without a file)\n"
    "  --lease DUR      fixed lease, never renewed (default: watchdog-renewed for as long as COMMAND runs)\n"
    "  --config FILE    dlock YAML config (default: $DLOCK_CONFIG, else built-in defaults\n"
    "                   with DLOCK_REDIS_HOST/PORT/PASSWORD applied)\n"
    "  --section NAME   read only that section of the config file (e.g. dlock, or services.dlock),\n"
    "                   for a service's own file that holds dlock's settings under it\n"
    "  --kill-on-lost   send COMMAND SIGTERM if the lock is lost while it runs (the loss is one line\n"
    "                   on stderr either way)\n"
    "  -h, --help       show this help\n"
    "`--` may be left out if COMMAND does not start with '-'; what follows COMMAND is its own.\n"
    "DUR is 250ms, 10s, 2m, 1h or a number of milliseconds. SIGINT, SIGTERM and SIGHUP are passed on\n"
    "to COMMAND once; COMMAND gets SIGKILL if dlock itself dies. Exit status: COMMAND's own (128+N\n"
    "if signal N killed it; 1 if it exited 0 but the lock was lost meanwhile), 75 lock busy for the\n"
    "whole wait (or the semaphore closed: its count set to 0), 69 Redis unreachable, 76 Redis refused\n"
    "(a name holding another type, a missing ACL right, a read-only replica), 78 bad config, 64 bad\n"
    "usage, 127 COMMAND not found, 126 COMMAND not executable, 71 system error.\n";

namespace {

// Shared with the on_lost hook, which runs on the lock service's watchdog thread.
struct RunState {
  std::string key;
  std::string command;
  bool kill_on_lost = false;
  std::atomic<pid_t> child{0};    // atomic: set once COMMAND runs, 0 again once reaped
  std::atomic<bool> lost{false};  // atomic: the watchdog reported the lock lost
};

// The library has already logged the loss, its one line on stderr.
void on_lost(RunState& state) {
  state.lost.store(true);
  const pid_t child = state.child.load();
  if (state.kill_on_lost && child > 0) ::kill(child, SIGTERM);
}

// Who holds `key` now, for the busy message; empty if that cannot be read.
// Over a Redlock, the owner a majority of the nodes hold, as `dlock status` reads it.
std::string current_holder(const Config& config, const std::string& key) {
  try {
    const auto redis_executor = make_executor(config.redis, false);
    RedisExecutor& redis = *redis_executor;
    detail::NodeScript script(redis, detail::kLockStatusScript.source, "read who holds the lock");
    detail::HolderDirectory holders(redis, config.lock.key_prefix);
    const detail::LockReading reading = detail::read_lock_status(script, holders, redis.endpoint(), config.lock, key);
    if (reading.refusal || !reading.status.held()) return "";
    return ", held by " + holder_text(reading.status.holders.front(), now_unix_ms());
  } catch (const Error&) {
    return "";
  }
}

// Whether the semaphore `name` is closed (its count set to 0): no permit can
// be had, however long one waits, until set_permits raises it.
bool closed(RedisLockService& service, const std::string& name) {
  try {
    return service.semaphore(name).permits() < 1;
  } catch (const Error&) {
    return false;
  }
}

// --permits NAME:N: the semaphore NAME (which may hold ':' itself), N permits in all.
struct Permits {
  std::string name;
  long long count = 0;
};

Permits parse_permits(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw UsageError("--permits: '" + text + "' is not NAME:N; for example --permits backups:4");
  }
  Permits permits{text.substr(0, colon), 0};
  const std::string count = text.substr(colon + 1);
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), permits.count);
  if (count.empty() || error != std::errc() || end != count.data() + count.size() || permits.count < 1) {
    throw UsageError("--permits: '" + count + "' in '" + text + "' is not a count of 1 or more permits");
  }
  return permits;
}

LockOptions lock_options(const ParsedArgs& parsed) {
  LockOptions options;
  if (auto wait = parsed.value("--wait")) options.wait = parse_duration(*wait, "--wait");
  if (auto lease = parsed.value("--lease")) {
    options.lease = parse_duration(*lease, "--lease");
    if (options.lease->count() <= 0) throw UsageError("--lease: must be longer than 0");
  }
  return options;
}

// Releases the hold; a lock that turns out to be gone counts as lost (the
// library logged that once, whoever found it).
void release(LockGuard& guard, RunState& state) {
  try {
    guard.unlock();
  } catch (const LockLostError&) {
    state.lost.store(true);
  } catch (const Error& e) {
    std::cerr << "dlock: could not release " << state.key << " (it expires by itself within its lease): "
              << e.what() << "\n";
  }
}

}  // namespace

int run_command(std::span<char* const> args) {
  // With --permits there is no KEY: the first positional is COMMAND.
  const bool permits_mode = std::any_of(args.begin(), args.end(), [](const char* arg) {
    const std::string_view text(arg);
    return text == "--permits" || text.starts_with("--permits=");
  });
  OptionSpec spec{kConfigOptions, {"--kill-on-lost", "--read", "--write"}, permits_mode ? 0 : 1};
  spec.valued.insert({"--wait", "--lease", "--permits"});
  const ParsedArgs parsed = parse_args(args, spec);
  if (parsed.help) {
    std::cout << kRunUsage;
    return kExitOk;
  }
  const std::optional<Permits> permits = parsed.value("--permits") ? parse_permits(*parsed.value("--permits"))
                                                                   : std::optional<Permits>();
  if (parsed.has("--read") && parsed.has("--write")) throw UsageError("--read and --write: pass one of them");
  if (permits && (parsed.has("--read") || parsed.has("--write"))) {
    throw UsageError("--permits holds a semaphore's permit, not a lock: leave out --read and --write");
  }
  if (!permits && parsed.positionals.empty()) throw UsageError("run needs a KEY (or --permits NAME:N)");
  if (parsed.command.empty()) throw UsageError("run needs a COMMAND after --");
  LockOptions options = lock_options(parsed);

  const InheritedFds inherited;  // before the lock service opens its sockets
  auto state = std::make_shared<RunState>();
  state->key = permits ? permits->name : parsed.positionals.front();
  state->command = parsed.command.front();
  state->kill_on_lost = parsed.has("--kill-on-lost");

  const Config config = resolve_config(parsed);
  auto service = make_lock_service(config);
  service->on_lost([state](const std::string&) { on_lost(*state); });

  // --wait, else the config's wait: try_lock alone would try once.
  options.wait = options.wait.value_or(config.lock.wait);
  LockGuard guard;
  try {
    if (permits) {
      guard = service->semaphore(permits->name, permits->count).try_acquire(1, options);
    } else if (parsed.has("--read")) {
      guard = service->try_read_lock(state->key, options);
    } else if (parsed.has("--write")) {
      guard = service->try_write_lock(state->key, options);
    } else {
      guard = service->try_lock(state->key, options);
    }
  } catch (const InvalidArgument&) {
    // The library refuses to ask a semaphore for more permits than it has: for one permit, a closed one.
    if (!permits || !closed(*service, permits->name)) throw;
    std::cerr << "dlock: semaphore " << permits->name << " is closed: its permit count is 0 (set_permits(0)), "
              << "so no permit can be had; COMMAND did not run. Open it again with set_permits(N)\n";
    return kExitTempFail;
  } catch (const RedisError&) {
    rethrow_if_replica(config.redis, "cannot take the lock " + state->key);
  }
  if (!guard) {
    const bool plain = !permits && !parsed.has("--read") && !parsed.has("--write");
    const std::string holder = plain ? current_holder(config, state->key)
                               : permits ? ": all " + std::to_string(permits->count) + " permits are held, or "
                                           "others wait ahead in line"
                                         : std::string();
    if (options.wait->count() == 0) {
      std::cerr << "dlock: " << state->key << " is busy" << holder
                << "; tried once, without waiting: pass --wait DUR to wait for it\n";
    } else {
      std::cerr << "dlock: " << state->key << " is still busy after waiting " << options.wait->count() << "ms"
                << holder << "; COMMAND did not run"
                << (parsed.has("--wait") ? "" : " (the wait is the config's lock.wait_ms: pass --wait DUR to change it)")
                << "\n";
    }
    return kExitTempFail;
  }

  // Installed once the lock is held: a signal before this point ends dlock
  // the default way, with no command started; one from here on is passed on.
  SignalForwarder forwarder;
  if (const int signal = forwarder.take_pending(); signal != 0) {
    release(guard, *state);
    return kExitSignalBase + signal;
  }
  const SpawnResult child = spawn(parsed.command, inherited);
  if (child.pid < 0) {
    std::cerr << "dlock: " << state->command << ": " << std::strerror(child.error) << "\n";
    release(guard, *state);
    return child.error == ENOENT ? kExitNotFound : kExitCannotExecute;
  }
  state->child.store(child.pid);
  forwarder.attach(child.pid);
  // The hook may have fired before the child existed; it could not stop it then.
  if (state->kill_on_lost && state->lost.load()) ::kill(child.pid, SIGTERM);

  wait_until_ended(child.pid);
  state->child.store(0);
  forwarder.detach();
  const int status = reap(child.pid);
  release(guard, *state);
  if (state->lost.load() && status == kExitOk) return kExitFailure;
  return status;
}

}  // namespace dlock::cli
