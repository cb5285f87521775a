// Owner tokens: 128 random bits per service instance plus a random id per
// thread; unique across threads and instances.
#include <catch2/catch.hpp>

#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "dlock/owner_token.hpp"
#include "services.hpp"

TEST_CASE("instance ids are 128 random bits in hex and never repeat", "[owner-token]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto id = dlock::detail::random_instance_id();
    CHECK(std::regex_match(id, std::regex("[0-9a-f]{32}")));
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("each thread has its own id, stable for the thread's life", "[owner-token]") {
  std::mutex mutex;
  std::set<std::string> ids;
  int unstable = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&] {
      const std::string first = dlock::detail::current_thread_id();
      const std::string again = dlock::detail::current_thread_id();
      std::lock_guard lock(mutex);  // Catch2 assertions are not thread-safe: record, check later
      ids.insert(first);
      if (first != again) ++unstable;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ids.size() == 32);
  CHECK(unstable == 0);
  CHECK(ids.count(dlock::detail::current_thread_id()) == 0);
}

TEST_CASE("the hold stored in Redis is instance:thread:acquisition and differs between instances", "[owner-token]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  std::string a, b;
  {
    auto guard = first->lock("a");
    a = redis.run({"HKEYS", "dlock:{a}"});
  }
  {
    auto guard = second->lock("a");
    b = redis.run({"HKEYS", "dlock:{a}"});
  }
  CHECK(std::regex_match(a, std::regex("[0-9a-f]{32}:[0-9a-f]{16}:[0-9a-f]+")));
  CHECK(std::regex_match(b, std::regex("[0-9a-f]{32}:[0-9a-f]{16}:[0-9a-f]+")));
  CHECK(a.substr(0, 32) != b.substr(0, 32));
  CHECK(a.substr(33, 16) == b.substr(33, 16));  // same thread, different instances
}
