#include "minimal_pair_client.hpp"

namespace bench {
namespace {

// KEYS[1] the lock (a hash owner -> hold count), KEYS[2] its fence counter;
// ARGV[1] owner, ARGV[2] lease in ms. Replies nil when granted, else the
// lock's PTTL.
const char* const kAcquireScript = R"lua(
-- Free: the owner takes it with one hold and draws a fencing token.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('INCR', KEYS[2])
  return nil
end
-- Re-entry: the owner holds it already; one hold more, lease restarted.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return nil
end
-- Held by another owner: how long its lease still runs.
return redis.call('PTTL', KEYS[1])
)lua";

// KEYS[1] the lock, KEYS[2] the channel its waiters listen on; ARGV[1]
// owner, ARGV[2] lease in ms. Replies the holds left, or -1 for not owner.
const char* const kReleaseScript = R"lua(
-- Not the owner (never held, or its lease ran out): nothing to give back.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
-- An inner release: the outer hold keeps the lock, lease restarted.
if holds > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return holds
end
-- The last hold: the lock is free, and its waiters are told.
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[1])
return 0
)lua";

}  // namespace

MinimalPairClient::MinimalPairClient(const std::string& host, int port)
    : connection_(host, port), acquire_sha_(connection_.load(kAcquireScript)),
      release_sha_(connection_.load(kReleaseScript)) {}

bool MinimalPairClient::acquire(const std::string& lock_key, const std::string& fence_key, const std::string& owner,
                                long long lease_ms) {
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"EVALSHA", acquire_sha_.data(), "2", lock_key.data(), fence_key.data(), owner.data(),
                        lease.data()};
  const std::size_t lens[] = {7, acquire_sha_.size(), 1, lock_key.size(), fence_key.size(), owner.size(),
                              lease.size()};
  return connection_.call(7, argv, lens)->type == REDIS_REPLY_NIL;
}

long long MinimalPairClient::release(const std::string& lock_key, const std::string& channel,
                                     const std::string& owner, long long lease_ms) {
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"EVALSHA", release_sha_.data(), "2", lock_key.data(), channel.data(), owner.data(),
                        lease.data()};
  const std::size_t lens[] = {7, release_sha_.size(), 1, lock_key.size(), channel.size(), owner.size(),
                              lease.size()};
  return connection_.call(7, argv, lens)->integer;
}

}  // namespace bench
