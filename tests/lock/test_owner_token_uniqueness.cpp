// Owner tokens seen from Redis: unique across many threads and many service
// instances, and 128 random bits per instance rather than anything derived
// from time, pid or a counter. (Format and per-thread stability are in
// test_owner_token.cpp.)
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <mutex>
#include <set>
#include <thread>

#include "dlock/owner_token.hpp"
#include "services.hpp"

TEST_CASE("owner tokens are unique across 4 service instances x 16 threads", "[owner-token]") {
  dlock::test::RedisServer redis;
  std::vector<std::shared_ptr<dlock::RedisLockService>> services;
  for (int i = 0; i < 4; ++i) services.push_back(dlock::test::make_service(redis));
  std::mutex mutex;
  std::vector<std::string> tokens;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t s = 0; s < services.size(); ++s) {
        const std::string key = "t" + std::to_string(t) + "s" + std::to_string(s);
        auto guard = services[s]->lock(key);
        const std::string token = redis.run({"HKEYS", "dlock:{" + key + "}"});
        std::lock_guard lock(mutex);
        tokens.push_back(token);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(tokens.size() == 64);
  std::set<std::string> whole(tokens.begin(), tokens.end()), instances, thread_ids;
  for (const auto& token : tokens) {
    REQUIRE(token.size() > 32 + 1 + 16 + 1);  // instance:thread:acquisition
    instances.insert(token.substr(0, 32));
    thread_ids.insert(token.substr(33, 16));
  }
  CHECK(whole.size() == 64);
  CHECK(instances.size() == 4);
  CHECK(thread_ids.size() == 16);
}

TEST_CASE("instance ids look like 128 uniform random bits", "[owner-token]") {
  // Each of the 128 bit positions is set in about half of 4000 ids (a counter, a time or a pid
  // would leave its high bits constant): 0.5 +- 0.06 is more than 7 standard deviations wide.
  constexpr int kIds = 4000;
  std::array<int, 128> ones{};
  for (int i = 0; i < kIds; ++i) {
    const std::string id = dlock::detail::random_instance_id();
    REQUIRE(id.size() == 32);
    for (int nibble = 0; nibble < 32; ++nibble) {
      const int value = std::stoi(id.substr(nibble, 1), nullptr, 16);
      for (int bit = 0; bit < 4; ++bit) ones[nibble * 4 + bit] += (value >> bit) & 1;
    }
  }
  int skewed = 0;
  for (int count : ones) skewed += (count < kIds * 0.44 || count > kIds * 0.56) ? 1 : 0;
  CHECK(skewed == 0);
}

TEST_CASE("services created at the same instant in different processes get different instance ids",
          "[owner-token]") {
  // Same start time, consecutive pids: anything derived from them would collide or be close.
  constexpr int kChildren = 8;
  int pipes[kChildren][2];
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    REQUIRE(::pipe(pipes[i]) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string id = dlock::detail::random_instance_id();
      ::_exit(::write(pipes[i][1], id.data(), id.size()) == static_cast<ssize_t>(id.size()) ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::set<std::string> ids;
  for (int i = 0; i < kChildren; ++i) {
    char buffer[32];
    ::close(pipes[i][1]);
    ssize_t got = ::read(pipes[i][0], buffer, sizeof buffer);
    ::close(pipes[i][0]);
    ::waitpid(children[i], nullptr, 0);
    if (got == 32) ids.emplace(buffer, 32);
  }
  CHECK(ids.size() == kChildren);
}
