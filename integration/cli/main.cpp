// The `dlock` command: operators' and shell scripts' door to dlock locks.
//
//   dlock run KEY [--wait DUR] [--lease DUR] [--config FILE] [--kill-on-lost] -- COMMAND [ARGS...]
//   dlock status KEY... [--config FILE] [--json]
//   dlock list [PATTERN] [--config FILE] [--json]
//   dlock unlock --force KEY [--read-write | --semaphore [--owner TOKEN]] [--config FILE]
// Every command also takes --section NAME (dlock's section of a service's own config file).
//   dlock --version | --help | CMD --help

#include <algorithm>
#include <functional>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <spdlog/spdlog.h>

#include "child_process.hpp"
#include "cli_options.hpp"
#include "dlock/errors.hpp"
#include "dlock/version.hpp"
#include "exit_codes.hpp"
#include "list_command.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "run_command.hpp"
#include "status_command.hpp"
#include "unlock_command.hpp"

namespace {

using namespace dlock::cli;

const char* const kUsage =
    "usage: dlock COMMAND [OPTIONS]\n"
    "Reentrant distributed locks on Redis, from the shell.\n"
    "  run KEY [options] -- COMMAND [ARGS...]   run COMMAND while holding the lock KEY\n"
    "  status KEY... [--json]                   show who holds each lock (host, pid, since), hold count,\n"
    "                                           lease, fencing token\n"
    "  list [PATTERN] [--json]                  list the locks, read-write locks and semaphores held under\n"
    "                                           the prefix, with their holders\n"
    "  unlock --force KEY                       break a lock, whoever holds it (operators' escape hatch);\n"
    "                                           --read-write: its read-write lock, --semaphore: its permits\n"
    "  --version                                print the dlock version\n"
    "  -h, --help                               show this help; `dlock COMMAND --help` for a command's options\n"
    "Every command takes --config FILE (default: $DLOCK_CONFIG, else built-in defaults:\n"
    "Redis at 127.0.0.1:6379, prefix dlock:, overridden by DLOCK_REDIS_HOST/PORT/PASSWORD),\n"
    "and --section NAME to read only dlock's section of a service's own config file.\n"
    "Exit status 64 bad usage, 69 Redis unreachable, refusing the login (authentication failed) or not\n"
    "serving for now (over a Redlock: too few nodes past their restart delay), 76 Redis refused (a name\n"
    "holding another type, a missing ACL right, a read-only replica), 78 bad config, 70 internal error, 71 system error;\n"
    "see each command's help.\n";

struct Subcommand {
  const char* name;
  const char* usage;
  std::function<int(std::span<char* const>)> run;
};

// The message, the command's synopsis (its usage's first line) and where to read more.
void print_usage_error(const Subcommand& command, const char* message) {
  const std::string usage = command.usage;
  std::cerr << "dlock " << command.name << ": " << message << "\n"
            << usage.substr(0, usage.find('\n') + 1) << "Try 'dlock " << command.name << " --help' for more.\n";
}

// Turns what a subcommand throws into a one-line message and a sysexits code.
int run_reporting_errors(const Subcommand& command, std::span<char* const> args) {
  try {
    return command.run(args);
  } catch (const UsageError& e) {
    print_usage_error(command, e.what());
    return kExitUsage;
  } catch (const dlock::InvalidArgument& e) {  // e.g. an empty or too long KEY
    print_usage_error(command, e.what());
    return kExitUsage;
  } catch (const dlock::ConfigError& e) {
    const std::string message = e.what();
    // The usual cause: a service's own file, with dlock's settings in a section of it.
    const bool whole_file = std::none_of(args.begin(), args.end(), [](const char* arg) {
      return std::string_view(arg).starts_with("--section");
    });
    const bool hint = whole_file && message.find(": unknown section") != std::string::npos;
    std::cerr << "dlock: config error: " << message
              << (hint ? "; if the file holds a service's own settings too, pass --section with the name of "
                         "dlock's section"
                       : "")
              << "\n";
    return kExitConfig;
  } catch (const dlock::AuthenticationError& e) {
    // Redis answered and refused the login: the words "unreachable" would send an operator after the network.
    const std::string message = e.what();
    const bool said = message.find("authentication failed") != std::string::npos;
    std::cerr << "dlock: " << (said ? "" : "authentication failed: ") << message << "\n";
    return kExitUnavailable;
  } catch (const dlock::RestartDelayError& e) {
    std::cerr << "dlock: the redlock nodes answered, but too few may vote yet (restart delay): " << e.what() << "\n";
    return kExitUnavailable;
  } catch (const dlock::ConnectionError& e) {
    std::cerr << "dlock: redis unreachable: " << e.what() << "\n";
    return kExitUnavailable;
  } catch (const dlock::RedisError& e) {
    std::string message = e.what();
    // The library words a READONLY refusal as one of rights; say what it is (once).
    const std::string advice = dlock::detail::refusal_advice(message);
    if (message.find("READONLY") != std::string::npos && message.find(advice) == std::string::npos) {
      message += "; " + advice;
    }
    std::cerr << "dlock: redis refused: " << message << "\n";
    return kExitRedisError;
  } catch (const std::system_error& e) {
    std::cerr << "dlock: " << e.what() << "\n";
    return kExitOsError;
  } catch (const std::exception& e) {
    std::cerr << "dlock: internal error: " << e.what() << "\n";
    return kExitSoftware;
  }
}

}  // namespace

int main(int argc, char** argv) {
  reset_inherited_signal_state();  // before the lock service starts threads that inherit the mask
  // The library's log lines read as the command's own: "dlock: warning: ...", no timestamp.
  spdlog::set_pattern("dlock: %l: %v");
  const std::span<char* const> args(argv, static_cast<std::size_t>(argc));
  if (args.size() < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string first = args[1];
  if (first == "--version" || first == "-V") {
    std::cout << "dlock " << dlock::version() << "\n";
    return kExitOk;
  }
  if (first == "--help" || first == "-h" || first == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  const Subcommand subcommands[] = {
      {"run", kRunUsage, run_command},
      {"status", kStatusUsage, status_command},
      {"list", kListUsage, list_command},
      {"unlock", kUnlockUsage, unlock_command},
  };
  for (const auto& command : subcommands) {
    if (first == command.name) return run_reporting_errors(command, args.subspan(2));
  }
  std::cerr << "dlock: unknown command '" << first << "'\n" << kUsage;
  return kExitUsage;
}
