// The shared pub/sub connection: who gets called, when, and what happens
// when Redis goes away and comes back.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "dlock/hiredis_executor.hpp"
#include "dlock/subscriber.hpp"
#include "redis_server.hpp"
#include "services.hpp"
#include "admin_connection.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::Subscription;
using dlock::detail::Subscriber;
using dlock::test::RedisServer;
using dlock::test::eventually;

namespace {

// How many connections Redis counts as subscribed to channel.
int subscribers_of(const RedisServer& redis, const std::string& channel) {
  const std::string answer = redis.run({"PUBSUB", "NUMSUB", channel});  // "channel N"
  return std::stoi(answer.substr(answer.rfind(' ') + 1));
}

}  // namespace

TEST_CASE("a published message calls the subscription's callback") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
  std::atomic<int> calls{0};
  auto subscription = subscriber.subscribe("news", [&](const std::string&) { ++calls; });
  REQUIRE(subscription);

  // subscribe() returned after Redis confirmed, so the first publish is not lost.
  CHECK(redis.run({"PUBLISH", "news", "hello"}) == "1");
  CHECK(eventually([&] { return calls == 1; }));
  redis.run({"PUBLISH", "other", "hello"});
  redis.run({"PUBLISH", "news", "again"});
  CHECK(eventually([&] { return calls == 2; }));
}

TEST_CASE("two subscriptions on one channel are both called, and after one is reset only the other") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
  std::atomic<int> first_calls{0};
  std::atomic<int> second_calls{0};
  auto first = subscriber.subscribe("ch", [&](const std::string&) { ++first_calls; });
  auto second = subscriber.subscribe("ch", [&](const std::string&) { ++second_calls; });
  CHECK(subscribers_of(redis, "ch") == 1);  // one Redis-level subscription serves both

  redis.run({"PUBLISH", "ch", "x"});
  CHECK(eventually([&] { return first_calls == 1 && second_calls == 1; }));

  first.reset();
  CHECK_FALSE(first);
  CHECK(subscribers_of(redis, "ch") == 1);
  redis.run({"PUBLISH", "ch", "x"});
  CHECK(eventually([&] { return second_calls == 2; }));
  CHECK(first_calls == 1);
}

TEST_CASE("a reset subscription is not called again and Redis is unsubscribed") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
  std::atomic<int> calls{0};
  auto subscription = subscriber.subscribe("gone", [&](const std::string&) { ++calls; });
  redis.run({"PUBLISH", "gone", "x"});
  REQUIRE(eventually([&] { return calls == 1; }));

  subscription.reset();
  redis.run({"PUBLISH", "gone", "x"});
  CHECK(eventually([&] { return subscribers_of(redis, "gone") == 0; }));
  redis.run({"PUBLISH", "gone", "x"});
  std::this_thread::sleep_for(200ms);
  CHECK(calls == 1);

  auto again = subscriber.subscribe("gone", [&](const std::string&) { ++calls; });  // the channel can be taken up again
  CHECK(redis.run({"PUBLISH", "gone", "x"}) == "1");
  CHECK(eventually([&] { return calls == 2; }));
}

TEST_CASE("after a Redis restart each callback is called once and later messages arrive again") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
  std::atomic<int> a_calls{0};
  std::atomic<int> b_calls{0};
  auto a = subscriber.subscribe("a", [&](const std::string&) { ++a_calls; });
  auto b = subscriber.subscribe("b", [&](const std::string&) { ++b_calls; });

  redis.stop();
  std::this_thread::sleep_for(300ms);  // a few failed reconnects with back-off
  redis.start();

  CHECK(eventually([&] { return a_calls == 1 && b_calls == 1; }));  // the reconnect notice
  CHECK(eventually([&] { return subscribers_of(redis, "a") == 1 && subscribers_of(redis, "b") == 1; }));
  std::this_thread::sleep_for(200ms);
  CHECK(a_calls == 1);  // once, not once per attempt
  CHECK(b_calls == 1);

  redis.run({"PUBLISH", "a", "x"});
  CHECK(eventually([&] { return a_calls == 2; }));
  CHECK(b_calls == 1);
}

TEST_CASE("subscribing while Redis is down returns after the timeout and the subscription is made later") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.command_timeout = 300ms;
  redis.stop();
  Subscriber subscriber(config);
  std::atomic<int> calls{0};

  const auto started = std::chrono::steady_clock::now();
  auto subscription = subscriber.subscribe("late", [&](const std::string&) { ++calls; });
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK(subscription);

  redis.start();
  CHECK(eventually([&] { return subscribers_of(redis, "late") == 1; }));
  CHECK(eventually([&] { return calls >= 1; }));  // it may have missed a message meanwhile
  const int before = calls;
  redis.run({"PUBLISH", "late", "x"});
  CHECK(eventually([&] { return calls == before + 1; }));
}

TEST_CASE("a callback may reset its own subscription and subscribe anew without deadlock") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
  std::atomic<int> calls{0};
  std::atomic<int> next_calls{0};
  Subscription self;
  Subscription next;
  self = subscriber.subscribe("once", [&](const std::string&) {
    ++calls;
    self.reset();
    next = subscriber.subscribe("next", [&](const std::string&) { ++next_calls; });
  });

  redis.run({"PUBLISH", "once", "x"});
  CHECK(eventually([&] { return calls == 1; }));
  CHECK(eventually([&] { return subscribers_of(redis, "next") == 1; }));
  redis.run({"PUBLISH", "once", "x"});
  redis.run({"PUBLISH", "next", "x"});
  CHECK(eventually([&] { return next_calls == 1; }));
  CHECK(calls == 1);
}

TEST_CASE("destroying the subscriber with live subscriptions is quick and leaves them harmless") {
  RedisServer redis;
  std::atomic<int> calls{0};
  Subscription survivor;
  {
    auto subscriber = std::make_unique<Subscriber>(redis.config().redis);
    survivor = subscriber->subscribe("ch", [&](const std::string&) { ++calls; });
    auto other = subscriber->subscribe("ch2", [&](const std::string&) { ++calls; });
    const auto started = std::chrono::steady_clock::now();
    subscriber.reset();
    CHECK(std::chrono::steady_clock::now() - started < 1s);
  }
  CHECK(eventually([&] { return subscribers_of(redis, "ch") == 0; }));
  survivor.reset();  // cancelling after the subscriber is gone does nothing
  CHECK(calls == 0);
}

TEST_CASE("destroying a subscriber that never subscribed starts and joins nothing") {
  RedisServer redis;
  Subscriber subscriber(redis.config().redis);
}

TEST_CASE("the executor delivers messages through its subscriber") {
  RedisServer redis;
  dlock::HiredisExecutor executor(redis.config().redis);
  std::atomic<int> calls{0};
  auto subscription = executor.subscribe("dlock:{k}:released", [&](const std::string&) { ++calls; });
  executor.command({"PUBLISH", "dlock:{k}:released", "1"});
  CHECK(eventually([&] { return calls == 1; }));
  CHECK(executor.endpoint() == "127.0.0.1:" + std::to_string(redis.port()));
}

TEST_CASE("a subscriber connection that silently stops answering is found out and replaced") {
  RedisServer redis;
  dlock::test::TcpProxy proxy(redis.port());
  dlock::RedisConfig config = redis.config().redis;
  config.port = proxy.port();
  config.command_timeout = 500ms;
  Subscriber subscriber(config);
  std::atomic<int> messages{0}, notices{0};
  auto subscription = subscriber.subscribe("half-open", [&](const std::string& message) {
    if (message.empty()) {
      ++notices;  // the reconnect notice: messages may have been missed
    } else {
      ++messages;
    }
  });
  REQUIRE(subscribers_of(redis, "half-open") == 1);
  // The link goes dead without a FIN or RST: Redis still counts the old subscriber, nothing arrives.
  proxy.blackhole_existing();
  // Within a PING interval plus the command timeout the subscriber notices, reconnects and resubscribes.
  CHECK(eventually([&] { return notices.load() >= 1; }, 5000ms));
  CHECK(proxy.accepted() >= 2);
  CHECK(eventually([&] {
    redis.run({"PUBLISH", "half-open", "hello"});
    return messages.load() >= 1;
  }, 3000ms));
}

TEST_CASE("a server that refuses the subscriber with an error is retried with back-off, not in a loop", "[subscriber]") {
  // An error reply (here: max number of clients) proves nothing about the connection.
  dlock::test::RedisServer redis;
  dlock::test::AdminConnection admin(redis);
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  {
    auto warm = waiter->lock("warm-up", {.lease = 1000ms});
  }
  // Its pooled connection idle again: a destructor does not wait for its release's reply, whose connection is
  // back once it is read.
  REQUIRE(dlock::test::eventually([&] { return waiter->stats().released >= 1; }));
  auto held = holder->lock("busy", {.lease = 5000ms});
  REQUIRE(admin.run({"CONFIG", "SET", "maxclients", std::to_string(dlock::test::connected_clients(admin))}) == "OK");
  auto attempt = std::async(std::launch::async, [&] { return static_cast<bool>(waiter->try_lock("busy", {.wait = 1500ms, .lease = 2000ms})); });
  std::this_thread::sleep_for(300ms);
  const long long before = dlock::test::info_field(admin, "stats", "rejected_connections");
  std::this_thread::sleep_for(1000ms);
  const long long rejected = dlock::test::info_field(admin, "stats", "rejected_connections") - before;
  admin.run({"CONFIG", "SET", "maxclients", "10000"});
  attempt.get();
  INFO("connections the subscriber opened (and Redis rejected) in one second: " << rejected);
  // The back-off starts at 50 ms and doubles: a handful per second at most.
  CHECK(rejected <= 25);
}
