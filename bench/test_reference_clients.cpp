// The reference clients are what dlock is measured against, so they must be
// the locks they claim to be: the minimal pair reentrant, exclusive, fenced
// and announcing its release; the bare client exclusive and careful to
// delete only its own lock. Correctness only: nothing here is timed.
#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "bare_client.hpp"
#include "minimal_pair_client.hpp"
#include "raw_connection.hpp"
#include "redis_server.hpp"

namespace {

const std::string kLock = "bench:{pair}";
const std::string kFence = "bench:{pair}:fence";
const std::string kChannel = "bench:{pair}:released";
constexpr long long kLeaseMs = 30000;

// A connection subscribed to one channel, to see what a waiter would hear.
class Listener {
 public:
  Listener(const dlock::test::RedisServer& redis, const std::string& channel)
      : context_(redisConnect(redis.host().c_str(), redis.port())) {
    REQUIRE(context_ != nullptr);
    REQUIRE(context_->err == 0);
    const timeval timeout{5, 0};  // a message that never comes fails the test instead of hanging it
    redisSetTimeout(context_, timeout);
    freeReplyObject(redisCommand(context_, "SUBSCRIBE %s", channel.c_str()));
  }
  ~Listener() { redisFree(context_); }
  // The next message's payload, or "" if none came within the timeout (the
  // connection is then unusable: hiredis keeps a read timeout as an error).
  std::string next_message() {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK) return "";
    bench::Reply reply(static_cast<redisReply*>(raw));
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return "";
    return std::string(reply->element[2]->str, reply->element[2]->len);
  }

 private:
  redisContext* context_;
};

}  // namespace

TEST_CASE("the minimal pair counts holds 1, 2, 1, 0 and frees the lock at the last release", "[reference]") {
  dlock::test::RedisServer redis;
  bench::MinimalPairClient client(redis.host(), redis.port());
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  CHECK(redis.run({"HGET", kLock, "a"}) == "1");
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  CHECK(redis.run({"HGET", kLock, "a"}) == "2");
  CHECK(client.release(kLock, kChannel, "a", kLeaseMs) == 1);
  CHECK(redis.run({"HGET", kLock, "a"}) == "1");
  CHECK(std::stoll(redis.run({"PTTL", kLock})) > kLeaseMs - 5000);
  CHECK(client.release(kLock, kChannel, "a", kLeaseMs) == 0);
  CHECK(redis.run({"EXISTS", kLock}) == "0");
}

TEST_CASE("the minimal pair refuses a second owner while the first holds", "[reference]") {
  dlock::test::RedisServer redis;
  bench::MinimalPairClient first(redis.host(), redis.port());
  bench::MinimalPairClient second(redis.host(), redis.port());
  REQUIRE(first.acquire(kLock, kFence, "a", kLeaseMs));
  CHECK_FALSE(second.acquire(kLock, kFence, "b", kLeaseMs));
  CHECK(redis.run({"HGETALL", kLock}) == "a 1");
  // Nor can the second owner release it.
  CHECK(second.release(kLock, kChannel, "b", kLeaseMs) == -1);
  CHECK(redis.run({"HGETALL", kLock}) == "a 1");
  CHECK(first.release(kLock, kChannel, "a", kLeaseMs) == 0);
  CHECK(second.acquire(kLock, kFence, "b", kLeaseMs));
}

TEST_CASE("the minimal pair draws a fencing token per first acquisition, not per re-entry", "[reference]") {
  dlock::test::RedisServer redis;
  bench::MinimalPairClient client(redis.host(), redis.port());
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  CHECK(redis.run({"GET", kFence}) == "1");
  client.release(kLock, kChannel, "a", kLeaseMs);
  client.release(kLock, kChannel, "a", kLeaseMs);
  REQUIRE(client.acquire(kLock, kFence, "b", kLeaseMs));
  CHECK(redis.run({"GET", kFence}) == "2");
}

TEST_CASE("the minimal pair publishes on its channel at the last release only", "[reference]") {
  dlock::test::RedisServer redis;
  bench::MinimalPairClient client(redis.host(), redis.port());
  Listener waiter(redis, kChannel);
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  REQUIRE(client.acquire(kLock, kFence, "a", kLeaseMs));
  client.release(kLock, kChannel, "a", kLeaseMs);
  // Messages arrive in order: had the inner release published, its message would come before this one.
  redis.run({"PUBLISH", kChannel, "after the inner release"});
  client.release(kLock, kChannel, "a", kLeaseMs);
  CHECK(waiter.next_message() == "after the inner release");
  CHECK(waiter.next_message() == "a");
}

TEST_CASE("the bare client is exclusive and not reentrant", "[reference]") {
  dlock::test::RedisServer redis;
  bench::BareClient first(redis.host(), redis.port());
  bench::BareClient second(redis.host(), redis.port());
  REQUIRE(first.acquire("bench:bare", kLeaseMs));
  CHECK(redis.run({"GET", "bench:bare"}) == first.token());
  CHECK_FALSE(second.acquire("bench:bare", kLeaseMs));
  CHECK_FALSE(first.acquire("bench:bare", kLeaseMs));
  CHECK(std::stoll(redis.run({"PTTL", "bench:bare"})) > kLeaseMs - 5000);
}

TEST_CASE("the bare client deletes only a lock that holds its latest token", "[reference]") {
  dlock::test::RedisServer redis;
  bench::BareClient first(redis.host(), redis.port());
  bench::BareClient second(redis.host(), redis.port());
  REQUIRE(first.acquire("bench:bare", kLeaseMs));
  const std::string first_token = first.token();
  // The first lease runs out and another client takes the key.
  redis.run({"DEL", "bench:bare"});
  REQUIRE(second.acquire("bench:bare", kLeaseMs));
  CHECK_FALSE(first.release("bench:bare"));
  CHECK(redis.run({"GET", "bench:bare"}) == second.token());
  CHECK(second.release("bench:bare"));
  CHECK(redis.run({"EXISTS", "bench:bare"}) == "0");
  // Every acquisition draws a token of its own, and clients never share one.
  REQUIRE(first.acquire("bench:bare", kLeaseMs));
  CHECK(first.token() != first_token);
  CHECK(first.token() != second.token());
}
