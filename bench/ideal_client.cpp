#include "ideal_client.hpp"

#include <stdexcept>

#include "dlock/scripts.hpp"

namespace bench {

IdealClient::IdealClient(const std::string& host, int port) : context_(redisConnect(host.c_str(), port)) {
  if (context_ == nullptr || context_->err) throw std::runtime_error("ideal client cannot connect to redis");
  noop_sha_ = load("return 1");
  acquire_sha_ = load(std::string(dlock::detail::kAcquireScript.source));
  release_sha_ = load(std::string(dlock::detail::kReleaseScript.source));
  renew_sha_ = load(std::string(dlock::detail::kRenewScript.source));
}

IdealClient::~IdealClient() { redisFree(context_); }

redisReply* IdealClient::call(int argc, const char** argv, const size_t* lens) {
  auto* reply = static_cast<redisReply*>(redisCommandArgv(context_, argc, argv, lens));
  if (reply == nullptr) throw std::runtime_error("ideal client lost its connection");
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string message(reply->str, reply->len);
    freeReplyObject(reply);
    throw std::runtime_error("redis error: " + message);
  }
  return reply;
}

std::string IdealClient::load(const std::string& source) {
  const char* argv[] = {"SCRIPT", "LOAD", source.data()};
  const size_t lens[] = {6, 4, source.size()};
  redisReply* reply = call(3, argv, lens);
  std::string sha(reply->str, reply->len);
  freeReplyObject(reply);
  return sha;
}

void IdealClient::round_trip() {
  const char* argv[] = {"EVALSHA", noop_sha_.data(), "0"};
  const size_t lens[] = {7, noop_sha_.size(), 1};
  freeReplyObject(call(3, argv, lens));
}

namespace {

// The five keys of dlock's line scripts, in their order, for the lock's full name.
struct Names {
  explicit Names(const std::string& key) : all{key, key + ":fence", key + ":queue", key + ":alive", key + ":turn"} {}
  std::string all[5];
};

// What dlock sends with every acquire and release: the turn window and the fence retention (and the wait, 0).
const std::string kAcquireSettings = "0 1000 604800000";
const std::string kReleaseSettings = "1000 604800000";

}  // namespace

bool IdealClient::acquire(const std::string& key, const std::string& owner, long long lease_ms) {
  const Names names(key);
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"EVALSHA",           acquire_sha_.data(), "5",          names.all[0].data(),
                        names.all[1].data(), names.all[2].data(), names.all[3].data(), names.all[4].data(),
                        owner.data(),        lease.data(),        kAcquireSettings.data()};
  const size_t lens[] = {7, acquire_sha_.size(), 1, names.all[0].size(), names.all[1].size(), names.all[2].size(),
                         names.all[3].size(), names.all[4].size(), owner.size(), lease.size(), kAcquireSettings.size()};
  redisReply* reply = call(11, argv, lens);
  // Granted: the fencing token (an integer > 0, or text); not granted: an integer <= 0.
  bool acquired = reply->type == REDIS_REPLY_STRING || (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0);
  freeReplyObject(reply);
  return acquired;
}

void IdealClient::release(const std::string& key, const std::string& owner) {
  const Names names(key);
  const char* argv[] = {"EVALSHA",           release_sha_.data(), "5",          names.all[0].data(),
                        names.all[1].data(), names.all[2].data(), names.all[3].data(), names.all[4].data(),
                        owner.data(),        kReleaseSettings.data()};
  const size_t lens[] = {7, release_sha_.size(), 1, names.all[0].size(), names.all[1].size(), names.all[2].size(),
                         names.all[3].size(), names.all[4].size(), owner.size(), kReleaseSettings.size()};
  freeReplyObject(call(10, argv, lens));
}

void IdealClient::set_holds(const std::string& key, const std::string& owner, long long lease_ms, int holds) {
  const std::string lease = std::to_string(lease_ms);
  const std::string count = std::to_string(holds);
  const char* argv[] = {"EVALSHA", renew_sha_.data(), "1", key.data(), owner.data(), lease.data(), count.data()};
  const size_t lens[] = {7, renew_sha_.size(), 1, key.size(), owner.size(), lease.size(), count.size()};
  freeReplyObject(call(7, argv, lens));
}

long long IdealClient::get(const std::string& key) {
  const char* argv[] = {"GET", key.data()};
  const size_t lens[] = {3, key.size()};
  redisReply* reply = call(2, argv, lens);
  long long value = reply->type == REDIS_REPLY_STRING ? std::stoll(std::string(reply->str, reply->len)) : 0;
  freeReplyObject(reply);
  return value;
}

void IdealClient::increment(const std::string& counter_key) {
  const std::string next = std::to_string(get(counter_key) + 1);
  const char* argv[] = {"SET", counter_key.data(), next.data()};
  const size_t lens[] = {3, counter_key.size(), next.size()};
  freeReplyObject(call(3, argv, lens));
}

}  // namespace bench
