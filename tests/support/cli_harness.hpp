#pragma once
// Drives the real `dlock` binary (DLOCK_CLI_BIN) as an operator, a shell
// script or a supervisor would: scratch directories, config files, and dlock
// processes with their output in files.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.hpp"

extern char** environ;

namespace dlock::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A YAML config naming the test server, as an operator would write it.
// `redis_extra` adds lines to the redis section ("  username: x\n").
inline std::string config_file(const TempDir& dir, int port, const std::string& lock_section = "",
                               const std::string& redis_extra = "") {
  static std::atomic<int> counter{0};
  return dir.write("dlock-" + std::to_string(port) + "-" + std::to_string(counter++) + ".yaml",
                   "redis:\n  host: 127.0.0.1\n  port: " + std::to_string(port) +
                       "\n  connect_timeout_ms: 500\n  command_timeout_ms: 500\n" + redis_extra +
                       (lock_section.empty() ? "" : "lock:\n" + lock_section) + "logging:\n  level: warn\n");
}

// How a Dlock process is started, beyond its arguments.
struct Launch {
  std::vector<std::string> env;  // NAME=VALUE added to the environment (DLOCK_* are dropped from the rest)
  bool own_group = false;        // in a process group of its own, as supervisors start services
  bool ignore_sigchld = false;   // with SIGCHLD ignored and SIGTERM blocked, as a careless parent leaves them
};

// One `dlock` process with its stdout and stderr in files.
class Dlock {
 public:
  Dlock(const TempDir& dir, const std::vector<std::string>& args, const Launch& launch = {}) {
    static std::atomic<int> counter{0};
    const std::string id = std::to_string(counter++);
    out_path_ = dir.file("out-" + id);
    err_path_ = dir.file("err-" + id);

    std::vector<std::string> argv{DLOCK_CLI_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> arg_pointers;
    for (auto& arg : argv) arg_pointers.push_back(arg.data());
    arg_pointers.push_back(nullptr);
    // The tests say which config to use; nothing leaks in from the caller's environment.
    std::vector<std::string> env = launch.env;
    for (char** var = environ; *var; ++var) {
      if (std::strncmp(*var, "DLOCK_", 6) != 0) env.emplace_back(*var);
    }
    std::vector<char*> env_pointers;
    for (auto& var : env) env_pointers.push_back(var.data());
    env_pointers.push_back(nullptr);

    const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    // No Catch assertion here: tests start these from several threads, and Catch is not thread-safe.
    if (out < 0 || err < 0) throw std::runtime_error("cannot create the output files of dlock");
    pid_ = ::fork();
    if (pid_ == 0) {  // async-signal-safe calls only: the test process has threads
      ::dup2(out, 1);
      ::dup2(err, 2);
      if (launch.own_group) ::setpgid(0, 0);
      if (launch.ignore_sigchld) {
        ::signal(SIGCHLD, SIG_IGN);
        sigset_t blocked;
        sigemptyset(&blocked);
        sigaddset(&blocked, SIGTERM);
        ::sigprocmask(SIG_BLOCK, &blocked, nullptr);
      }
      ::execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
    if (pid_ < 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(errno));
    if (launch.own_group) ::setpgid(pid_, pid_);
  }
  ~Dlock() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Dlock(const Dlock&) = delete;
  Dlock& operator=(const Dlock&) = delete;

  pid_t pid() const { return pid_; }

  // The exit status, or 128 + N if signal N killed dlock itself.
  int wait() {
    int status = 0;
    const pid_t waited = ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (waited <= 0) return -3;  // not a Catch assertion: called from several threads
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
};

struct Result {
  int status;
  std::string out;
  std::string err;
};

inline Result dlock_cli(const TempDir& dir, const std::vector<std::string>& args, const Launch& launch = {}) {
  Dlock process(dir, args, launch);
  const int status = process.wait();
  return {status, process.out(), process.err()};
}

// dlock with `args` (the subcommand first) and --config `config` right after the subcommand, so before
// any COMMAND of `run`.
inline Result dlock_cli_with(const TempDir& dir, const std::string& config, std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"--config", config});
  return dlock_cli(dir, args);
}

// A shell script that says when it runs and writes which signal it got, then exits 0.
inline std::string trap_script(const TempDir& dir) {
  return dir.write("trap.sh",
                   "#!/bin/sh\n"
                   "for sig in TERM INT HUP; do trap \"echo $sig > '" + dir.file("marker") + "'; exit 0\" $sig; done\n"
                   "touch '" + dir.file("ready") + "'\n"
                   "while true; do sleep 0.05; done\n",
                   true);
}

// A shell script that writes its pid to `pid`, then a line to `signals` for
// every SIGINT or SIGTERM it gets, and runs on until killed.
inline std::string counting_script(const TempDir& dir) {
  return dir.write("count.sh",
                   "#!/bin/sh\n"
                   "trap \"echo INT >> '" + dir.file("signals") + "'\" INT\n"
                   "trap \"echo TERM >> '" + dir.file("signals") + "'\" TERM\n"
                   "echo $$ > '" + dir.file("pid.tmp") + "'; mv '" + dir.file("pid.tmp") + "' '" + dir.file("pid") +
                       "'\n"
                   "while true; do sleep 0.05; done\n",
                   true);
}

// How many lines of `text` contain `part`.
inline int lines_containing(const std::string& text, const std::string& part) {
  std::istringstream lines(text);
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.find(part) != std::string::npos ? 1 : 0;
  return count;
}

inline std::string joined(const std::vector<std::string>& args) {
  std::string text;
  for (const auto& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// The raw JSON value of the first "name": in `json` (a string with its quotes).
inline std::string json_field(const std::string& json, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(json, match, std::regex("\"" + name + "\":(\"(?:[^\"\\\\]|\\\\.)*\"|[^,}\\]]*)"))) return "";
  return match[1];
}

}  // namespace dlock::test
