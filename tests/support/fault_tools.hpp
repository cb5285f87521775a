#pragma once
// Tools of the fault tests: commands sent back to back on one raw connection
// (so Redis runs them with nothing in between), Redis' own clock, helper
// programs started and signalled, all bounded in time.

#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.hpp"

extern char** environ;

namespace dlock::test {

// Sends `commands` on one fresh connection in a single write and returns each
// reply rendered as RedisServer::run does. Redis runs a client's pipelined
// commands one after another, so nothing of another client lands in between
// (e.g. PEXPIRETIME then DEBUG SLEEP: the expiry read is the last one before
// the server stops). Waits up to `timeout` for the replies.
inline std::vector<std::string> run_back_to_back(const RedisServer& redis,
                                                 const std::vector<std::vector<std::string>>& commands,
                                                 std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  redisContext* c = redisConnectWithTimeout(redis.host().c_str(), redis.port(), tv);
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    throw std::runtime_error("test client cannot reach redis on port " + std::to_string(redis.port()));
  }
  redisSetTimeout(c, tv);
  for (const auto& argv : commands) {
    std::vector<const char*> parts;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      parts.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c, static_cast<int>(argv.size()), parts.data(), lens.data());
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
      out.push_back(std::string("(connection error: ") + c->errstr + ")");
      break;
    }
    auto* reply = static_cast<redisReply*>(raw);
    if (reply->type == REDIS_REPLY_INTEGER) {
      out.push_back(std::to_string(reply->integer));
    } else if (reply->type == REDIS_REPLY_NIL) {
      out.push_back("(nil)");
    } else if (reply->str != nullptr) {
      out.emplace_back(reply->str, reply->len);
    } else {
      out.push_back("(array)");
    }
    freeReplyObject(reply);
  }
  redisFree(c);
  return out;
}

// Milliseconds since the Unix epoch by this host's wall clock: the clock Redis
// uses for PEXPIRETIME (same host, so the same clock).
inline long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A helper program started with posix_spawn (safe in a threaded process). It
// inherits the environment, so sanitizer options reach it too. The destructor
// SIGKILLs and reaps it if the test did not.
class Child {
 public:
  Child() = default;
  explicit Child(const std::vector<std::string>& argv, int stdout_fd = -1) { start(argv, stdout_fd); }
  Child(Child&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  Child& operator=(Child&& other) noexcept {
    if (this != &other) {
      kill_now();
      pid_ = other.pid_;
      other.pid_ = -1;
    }
    return *this;
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { kill_now(); }

  void start(const std::vector<std::string>& argv, int stdout_fd = -1) {
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
    pid_ = pid;
  }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // The exit status (as from waitpid) once it ended within `timeout`, else nothing.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// Puts Redis to sleep for `seconds` (DEBUG SLEEP, which the server must allow)
// on a thread of its own, and returns once it sleeps; join() the thread when
// done. Commands sent meanwhile time out on the client, and run when it wakes.
inline std::thread sleep_redis(const RedisServer& redis, const std::string& seconds) {
  std::thread sleeper(
      [&redis, seconds] { run_back_to_back(redis, {{"DEBUG", "SLEEP", seconds}}, std::chrono::seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  return sleeper;
}

// Keeps Redis busy running a script for about `seconds` on a thread of its
// own, and returns once others get BUSY (start the server with
// --busy-reply-threshold 100); join() the thread when done.
inline std::thread run_long_script(const RedisServer& redis, int seconds) {
  const std::string busy_loop = "local s = tonumber(redis.call('TIME')[1]) "
                                "while tonumber(redis.call('TIME')[1]) < s + " + std::to_string(seconds) + " do end "
                                "return 1";
  std::thread script(
      [&redis, busy_loop, seconds] {
        run_back_to_back(redis, {{"EVAL", busy_loop, "0"}}, std::chrono::seconds(seconds + 10));
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the busy-reply threshold
  return script;
}

}  // namespace dlock::test
