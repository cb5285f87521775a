#pragma once
// Small helpers shared by the tests: a lock service wired to a test server,
// and a bounded wait for a condition.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_server.hpp"

namespace dlock::test {

// A service built by the real factory against `redis`; `tweak` may change the config first.
inline std::shared_ptr<RedisLockService> make_service(const RedisServer& redis,
                                                      const std::function<void(Config&)>& tweak = {}) {
  Config config = redis.config();
  if (tweak) tweak(config);
  return make_lock_service(config);
}

// Polls `condition` until it holds or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// Polls an EXISTS of released keys until it answers "0". A guard's
// destructor (a block's exit, DistributedMutex::unlock()) sends its release
// without waiting for the reply, so a command on another connection right
// after it may reach Redis first. Briefly: the release is on its way, and a
// lock that was never released must not pass by expiring on a short lease.
inline bool released(const RedisServer& redis, const std::vector<std::string>& exists,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(500)) {
  return eventually([&] { return redis.run(exists) == "0"; }, timeout);
}

// Waits until `count` waiters stand in the line of `key` (default prefix) in
// Redis, then gives them `settle` to fall asleep there: a release offers the
// lock only to a waiter asleep in line. False if the line never got that long.
inline bool await_line(const RedisServer& redis, const std::string& key, int count,
                       std::chrono::milliseconds settle = std::chrono::milliseconds(300)) {
  const bool reached =
      eventually([&] { return redis.run({"ZCARD", "dlock:{" + key + "}:queue"}) == std::to_string(count); });
  std::this_thread::sleep_for(settle);
  return reached;
}

// Milliseconds by the Redis server's clock (TIME), as the scripts read it.
inline long long server_ms(const RedisServer& redis) {
  const std::string time = redis.run({"TIME"});
  return std::stoll(time.substr(0, time.find(' '))) * 1000 + std::stoll(time.substr(time.find(' ') + 1)) / 1000;
}

inline long long elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace dlock::test
