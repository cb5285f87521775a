#include "bare_client.hpp"

#include <cstdio>
#include <random>

namespace bench {
namespace {

// KEYS[1] the lock, ARGV[1] the releasing client's token. Deletes the key
// only while it still holds that token, so a client whose lease ran out
// cannot delete the next holder's lock. Replies 1 if deleted, else 0.
const char* const kCompareAndDeleteScript =
    "if redis.call('GET',KEYS[1])==ARGV[1] then return redis.call('DEL',KEYS[1]) end return 0";

// 16 hex digits, so that tokens of clients in other processes never meet.
std::string random_prefix() {
  std::random_device device;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%08x%08x", device(), device());
  return std::string(hex) + ":";
}

}  // namespace

BareClient::BareClient(const std::string& host, int port)
    : connection_(host, port), release_sha_(connection_.load(kCompareAndDeleteScript)),
      token_prefix_(random_prefix()) {}

bool BareClient::acquire(const std::string& key, long long lease_ms) {
  token_ = token_prefix_;
  token_ += std::to_string(++acquisitions_);
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"SET", key.data(), token_.data(), "NX", "PX", lease.data()};
  const std::size_t lens[] = {3, key.size(), token_.size(), 2, 2, lease.size()};
  return connection_.call(6, argv, lens)->type == REDIS_REPLY_STATUS;  // "OK"; nil if the key exists
}

bool BareClient::release(const std::string& key) {
  const char* argv[] = {"EVALSHA", release_sha_.data(), "1", key.data(), token_.data()};
  const std::size_t lens[] = {7, release_sha_.size(), 1, key.size(), token_.size()};
  return connection_.call(5, argv, lens)->integer == 1;
}

}  // namespace bench
