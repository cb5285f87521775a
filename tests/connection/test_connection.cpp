// The hiredis executor and its pool: what a caller can rely on when Redis
// answers, refuses, disappears or comes back.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/connection_pool.hpp"
#include "dlock/errors.hpp"
#include "dlock/hiredis_executor.hpp"
#include "redis_server.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using dlock::ConnectionError;
using dlock::HiredisExecutor;
using dlock::RedisReply;
using dlock::test::RedisServer;
using dlock::test::eventually;

namespace {

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ConnectionError& error) {
    return error.what();
  }
  return "(no ConnectionError)";
}

// A TCP socket that listens but never accepts: connecting works, answers never come.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace

TEST_CASE("a command round trip keeps binary values with NUL bytes intact") {
  RedisServer redis;
  HiredisExecutor executor(redis.config().redis);
  executor.connect();

  const std::string value("a\0b\r\nc\0", 7);
  const std::string key("key\0with nul", 12);
  REQUIRE(executor.command({"SET", key, value}).str == "OK");
  const RedisReply reply = executor.command({"GET", key});
  CHECK(reply.type == RedisReply::Type::String);
  CHECK(reply.str == value);
  CHECK(executor.command({"GET", "absent"}).is_nil());
  CHECK(executor.command({"STRLEN", key}).integer == 7);
}

TEST_CASE("an error reply comes back as an error reply, not an exception") {
  RedisServer redis;
  HiredisExecutor executor(redis.config().redis);
  executor.command({"SET", "text", "not a number"});

  const RedisReply reply = executor.command({"INCR", "text"});
  CHECK(reply.is_error());
  CHECK_THAT(reply.str, Contains("not an integer"));
  CHECK(executor.command({"PING"}).str == "PONG");  // the connection is still fine
}

TEST_CASE("a pipeline returns its replies in the order of its commands") {
  RedisServer redis;
  HiredisExecutor executor(redis.config().redis);

  const auto replies = executor.pipeline({{"SET", "k", "1"}, {"INCR", "k"}, {"HGET", "k", "f"}, {"GET", "k"},
                                          {"RPUSH", "l", "x", "y"}, {"LRANGE", "l", "0", "-1"}});
  REQUIRE(replies.size() == 6);
  CHECK(replies[0].type == RedisReply::Type::Status);
  CHECK(replies[1].integer == 2);
  CHECK(replies[2].is_error());  // WRONGTYPE does not stop the rest
  CHECK(replies[3].str == "2");
  CHECK(replies[4].integer == 2);
  REQUIRE(replies[5].type == RedisReply::Type::Array);
  REQUIRE(replies[5].elements.size() == 2);
  CHECK(replies[5].elements[1].str == "y");
  CHECK(executor.pipeline({}).empty());
}

TEST_CASE("a pipeline with an empty command is refused whole and the connection stays in step") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.pool_size = 1;  // so the next call gets the same connection, if the pool kept it
  HiredisExecutor executor(config);
  REQUIRE(executor.command({"SET", "k", "v"}).str == "OK");

  CHECK_THROWS_AS(executor.pipeline({{"SET", "k", "changed"}, {}, {"INCR", "n"}}), dlock::InvalidArgument);
  // Nothing of the refused pipeline ran, and the next caller gets its own reply, not one left behind.
  CHECK(executor.command({"GET", "k"}).str == "v");
  CHECK(executor.command({"EXISTS", "n"}).integer == 0);
  CHECK(executor.pipeline({{"GET", "k"}, {"PING"}})[1].str == "PONG");
}

TEST_CASE("an unreachable port fails fast with a ConnectionError naming host and port") {
  dlock::RedisConfig config;
  config.port = dlock::test::free_loopback_port();
  HiredisExecutor executor(config);

  const auto started = std::chrono::steady_clock::now();
  const std::string message = message_of([&] { executor.connect(); });
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK_THAT(message, Contains("127.0.0.1:" + std::to_string(config.port)));
  CHECK_THAT(message, Contains("connection refused"));
  CHECK_THAT(message, Contains("redis.port"));
  CHECK_THROWS_AS(executor.command({"PING"}), ConnectionError);
}

TEST_CASE("a server that never answers times out after the command timeout") {
  SilentServer silent;
  dlock::RedisConfig config;
  config.port = silent.port();
  config.command_timeout = 300ms;
  HiredisExecutor executor(config);

  const auto started = std::chrono::steady_clock::now();
  const std::string message = message_of([&] { executor.connect(); });
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK_THAT(message, Contains("127.0.0.1:" + std::to_string(silent.port())));
  CHECK_THAT(message, Contains("timed out after 300 ms"));
}

TEST_CASE("a command Redis does not answer in time times out and the next one gets a fresh connection") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.command_timeout = 300ms;
  config.pool_size = 1;
  HiredisExecutor executor(config);
  executor.connect();

  redis.run({"CLIENT", "PAUSE", "1500"});
  CHECK_THAT(message_of([&] { executor.command({"SET", "k", "v"}); }), Contains("timed out after 300 ms"));
  CHECK(eventually([&] {
    try {
      return executor.command({"PING"}).str == "PONG";
    } catch (const ConnectionError&) {
      return false;
    }
  }));
}

TEST_CASE("a wrong password fails at connect with authentication failed") {
  RedisServer redis({"--requirepass", "s3cret"});
  auto config = redis.config().redis;

  config.password = "wrong";
  const std::string message = message_of([&] { HiredisExecutor(config).connect(); });
  CHECK_THROWS_AS(HiredisExecutor(config).connect(), dlock::AuthenticationError);
  CHECK_THAT(message, Contains("authentication failed"));
  CHECK_THAT(message, Contains("redis.password"));
  CHECK_THAT(message, Contains(std::to_string(config.port)));

  config.password.clear();
  CHECK_THAT(message_of([&] { HiredisExecutor(config).connect(); }), Contains("authentication failed"));
  CHECK_THROWS_AS(HiredisExecutor(config).connect(), dlock::AuthenticationError);

  config.password = "s3cret";
  HiredisExecutor executor(config);
  REQUIRE_NOTHROW(executor.connect());
  CHECK(executor.command({"PING"}).str == "PONG");
}

TEST_CASE("an ACL user logs in with username and password") {
  RedisServer redis({"--user", "alice", "on", ">pw", "~*", "&*", "+@all"});
  auto config = redis.config().redis;
  config.username = "alice";
  config.password = "pw";
  HiredisExecutor executor(config);
  REQUIRE_NOTHROW(executor.connect());
  CHECK(executor.command({"ACL", "WHOAMI"}).str == "alice");

  config.password = "not-pw";
  const std::string message = message_of([&] { HiredisExecutor(config).connect(); });
  CHECK_THAT(message, Contains("authentication failed"));
  CHECK_THAT(message, Contains("redis.username"));
}

TEST_CASE("the configured database is the one written to") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.database = 3;
  HiredisExecutor in_db3(config);
  in_db3.connect();
  in_db3.command({"SET", "where", "db3"});
  CHECK(in_db3.command({"GET", "where"}).str == "db3");

  config.database = 0;
  HiredisExecutor in_db0(config);
  CHECK(in_db0.command({"GET", "where"}).is_nil());
  CHECK(in_db0.pipeline({{"SELECT", "3"}, {"GET", "where"}})[1].str == "db3");

  config.database = 99;
  CHECK_THAT(message_of([&] { HiredisExecutor(config).connect(); }), Contains("redis.database"));
}

TEST_CASE("a connection killed by the server is replaced for the next command") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.pool_size = 1;
  HiredisExecutor executor(config);
  executor.command({"SET", "k", "v"});

  REQUIRE(redis.run({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}) == "1");
  CHECK(executor.command({"GET", "k"}).str == "v");
}

TEST_CASE("a lease whose connection broke is dropped, not returned to the pool") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.pool_size = 1;
  dlock::detail::ConnectionPool pool(config);
  {
    auto lease = pool.borrow();
    lease->command({"PING"});
    redis.run({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    CHECK_THROWS_AS(lease->command({"PING"}), ConnectionError);
    CHECK(lease->broken());
  }
  auto lease = pool.borrow();  // the broken one gave its slot back
  CHECK(lease->command({"PING"}).str == "PONG");
}

TEST_CASE("commands work again after the server restarts") {
  RedisServer redis;
  HiredisExecutor executor(redis.config().redis);
  executor.command({"SET", "k", "v"});

  redis.stop();
  CHECK_THROWS_AS(executor.command({"PING"}), ConnectionError);
  redis.start();
  CHECK(executor.command({"PING"}).str == "PONG");
  CHECK(executor.command({"GET", "k"}).is_nil());  // no persistence: the restart lost the data

  redis.kill();
  redis.start();
  CHECK(executor.pipeline({{"PING"}, {"PING"}}).size() == 2);
}

TEST_CASE("a pool of two connections serves eight threads at once without errors") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.pool_size = 2;
  HiredisExecutor executor(config);

  constexpr int kThreads = 8;
  constexpr int kIncrements = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        try {
          if (executor.command({"INCR", "counter"}).is_error()) ++failures;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(redis.run({"GET", "counter"}) == std::to_string(kThreads * kIncrements));
  const std::string clients = redis.run({"CLIENT", "LIST"});  // the pool's two plus this query's own
  CHECK(std::count(clients.begin(), clients.end(), '\n') <= 3);
}

TEST_CASE("an exhausted pool fails with a ConnectionError naming redis.pool_size") {
  RedisServer redis;
  auto config = redis.config().redis;
  config.pool_size = 2;
  config.command_timeout = 300ms;
  dlock::detail::ConnectionPool pool(config);

  auto first = pool.borrow();
  auto second = pool.borrow();
  const auto started = std::chrono::steady_clock::now();
  const std::string message = message_of([&] { pool.borrow(); });
  CHECK(std::chrono::steady_clock::now() - started >= 250ms);
  CHECK_THAT(message, Contains("pool exhausted"));
  CHECK_THAT(message, Contains("redis.pool_size"));

  std::thread giver([lease = std::move(first)]() mutable {
    std::this_thread::sleep_for(50ms);
    auto returned = std::move(lease);
  });
  auto third = pool.borrow();  // waits for the connection the other thread returns
  CHECK(third->command({"PING"}).str == "PONG");
  giver.join();
}
