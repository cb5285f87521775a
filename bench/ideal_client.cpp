#include "ideal_client.hpp"

#include <stdexcept>

#include "dlock/scripts.hpp"

namespace bench {

IdealClient::IdealClient(const std::string& host, int port) : context_(redisConnect(host.c_str(), port)) {
  if (context_ == nullptr || context_->err) throw std::runtime_error("ideal client cannot connect to redis");
  noop_sha_ = load("return 1");
  acquire_sha_ = load(std::string(dlock::detail::kAcquireScript.source));
  release_sha_ = load(std::string(dlock::detail::kReleaseScript.source));
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

bool IdealClient::acquire(const std::string& key, const std::string& owner, long long lease_ms) {
  const std::string fence = key + ":fence", queue = key + ":queue", turn = key + ":turn";
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"EVALSHA",    acquire_sha_.data(), "4",          key.data(), fence.data(), queue.data(),
                        turn.data(), owner.data(),        lease.data(), "0"};
  const size_t lens[] = {7, acquire_sha_.size(), 1, key.size(), fence.size(), queue.size(), turn.size(), owner.size(),
                         lease.size(), 1};
  redisReply* reply = call(10, argv, lens);
  bool acquired = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 && reply->element[0]->integer == 1;
  freeReplyObject(reply);
  return acquired;
}

void IdealClient::release(const std::string& key, const std::string& owner, long long lease_ms) {
  const std::string channel = key + ":released", queue = key + ":queue", turn = key + ":turn";
  const std::string lease = std::to_string(lease_ms);
  const char* argv[] = {"EVALSHA",    release_sha_.data(), "4",          key.data(), channel.data(), queue.data(),
                        turn.data(), owner.data(),        lease.data(), "200"};
  const size_t lens[] = {7, release_sha_.size(), 1, key.size(), channel.size(), queue.size(), turn.size(), owner.size(),
                         lease.size(), 3};
  freeReplyObject(call(10, argv, lens));
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
