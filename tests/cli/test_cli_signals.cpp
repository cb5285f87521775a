// `dlock run` and signals: who gets which signal how often, on a terminal and
// under a supervisor, and what happens to COMMAND when dlock itself dies.
#include <catch2/catch.hpp>

#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <thread>

#include "cli_harness.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using namespace dlock::test;

namespace {

// `dlock` on a pseudo-terminal of its own, as in a terminal window: the
// session leader, its process group the terminal's foreground job.
class TerminalDlock {
 public:
  TerminalDlock(const std::vector<std::string>& args) {
    std::vector<std::string> argv{DLOCK_CLI_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> pointers;
    for (auto& arg : argv) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    pid_ = ::forkpty(&terminal_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      ::execv(pointers[0], pointers.data());
      ::_exit(127);
    }
    if (pid_ < 0) throw std::runtime_error("forkpty failed");
  }
  ~TerminalDlock() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(terminal_);
  }
  TerminalDlock(const TerminalDlock&) = delete;
  TerminalDlock& operator=(const TerminalDlock&) = delete;

  pid_t pid() const { return pid_; }

  // What a user types at the keyboard; "\x03" is Ctrl-C.
  bool type(const std::string& keys) {
    return ::write(terminal_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
  }

  // The exit status once dlock ended within `timeout`, else -1.
  int wait_for_exit(std::chrono::milliseconds timeout) {
    int status = 0;
    const bool ended = eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!ended) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int terminal_ = -1;
};

// The fields of /proc/PID/stat after the command name: state, ppid, pgrp, ...; empty once reaped.
std::vector<std::string> stat_fields(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos) return fields;
  std::istringstream words(stat.substr(paren + 1));
  for (std::string word; words >> word;) fields.push_back(word);
  return fields;
}

// Whether `pid` runs (a zombie, waiting for a reaper, does not).
bool running(pid_t pid) {
  const auto fields = stat_fields(pid);
  return !fields.empty() && fields[0] != "Z";
}

std::string process_group(pid_t pid) {
  const auto fields = stat_fields(pid);
  return fields.size() > 2 ? fields[2] : "";
}

pid_t command_pid(const TempDir& dir) {
  REQUIRE(eventually([&] { return fs::exists(dir.file("pid")); }));
  return std::stoi(read_file(dir.file("pid")));
}

// The signals counting_script got, once a first one arrived and a duplicate had time to follow.
std::string signals_received(const TempDir& dir) {
  eventually([&] { return fs::exists(dir.file("signals")); });
  std::this_thread::sleep_for(500ms);
  return read_file(dir.file("signals"));
}

}  // namespace

TEST_CASE("Ctrl-C on a terminal reaches a command that moved to a process group of its own", "[cli][signals]") {
  // `timeout` puts itself in its own process group, out of the terminal's
  // foreground group, so the terminal's SIGINT reaches only dlock.
  RedisServer redis;
  TempDir dir;
  TerminalDlock dlock({"run", "cli:tty", "--config", config_file(dir, redis.port()), "--", "timeout", "120",
                       trap_script(dir)});
  REQUIRE(eventually([&] { return fs::exists(dir.file("ready")); }));
  REQUIRE(dlock.type("\x03"));
  CHECK(eventually([&] { return read_file(dir.file("marker")) == "INT\n"; }, 20s));
  CHECK(dlock.wait_for_exit(20s) >= 0);
  CHECK(redis.run({"EXISTS", "dlock:{cli:tty}"}) == "0");
}

TEST_CASE("Ctrl-C on a terminal reaches a command in dlock's process group once", "[cli][signals]") {
  RedisServer redis;
  TempDir dir;
  TerminalDlock dlock({"run", "cli:tty", "--config", config_file(dir, redis.port()), "--", counting_script(dir)});
  const pid_t command = command_pid(dir);
  // In the terminal's foreground job, the command gets ^C from the terminal itself, and reads it.
  CHECK(process_group(command) == process_group(dlock.pid()));
  REQUIRE(dlock.type("\x03"));
  CHECK(signals_received(dir) == "INT\n");
}

TEST_CASE("a supervisor's SIGTERM to dlock's whole process group reaches the command once", "[cli][signals]") {
  RedisServer redis;
  TempDir dir;
  // As systemd, timeout and other supervisors start a service: in a process group of its own.
  Dlock dlock(dir, {"run", "cli:group", "--config", config_file(dir, redis.port()), "--", counting_script(dir)},
              {.env = {}, .own_group = true});
  const pid_t command = command_pid(dir);
  // Outside the group the supervisor signals, the command gets only what dlock passes on. (Counting
  // deliveries alone cannot show a second one: it may merge with the first while both are pending.)
  CHECK(process_group(command) != process_group(dlock.pid()));
  REQUIRE(::kill(-dlock.pid(), SIGTERM) == 0);
  CHECK(signals_received(dir) == "TERM\n");
}

TEST_CASE("a command does not outlive a SIGKILLed dlock run", "[cli][signals]") {
  RedisServer redis;
  TempDir dir;
  Dlock dlock(dir, {"run", "cli:orphan", "--config", config_file(dir, redis.port()), "--", counting_script(dir)});
  const pid_t command = command_pid(dir);
  REQUIRE(running(command));
  REQUIRE(::kill(dlock.pid(), SIGKILL) == 0);
  CHECK(dlock.wait() == 128 + SIGKILL);
  CHECK(eventually([&] { return !running(command); }));
  if (running(command)) ::kill(command, SIGKILL);  // a failed check must not leave it behind
}

TEST_CASE("dlock run works for a parent that ignores SIGCHLD and blocks SIGTERM", "[cli][signals]") {
  RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  const Launch careless{.env = {}, .own_group = false, .ignore_sigchld = true};
  const auto result = dlock_cli(dir, {"run", "cli:chld", "--config", config, "--", "sh", "-c", "exit 7"}, careless);
  INFO(result.err);
  CHECK(result.status == 7);

  Dlock dlock(dir, {"run", "cli:chld", "--config", config, "--", trap_script(dir)}, careless);
  REQUIRE(eventually([&] { return fs::exists(dir.file("ready")); }));
  REQUIRE(::kill(dlock.pid(), SIGTERM) == 0);
  CHECK(dlock.wait() == 0);  // the command trapped the SIGTERM dlock passed on, and exited 0
  CHECK(read_file(dir.file("marker")) == "TERM\n");
}
