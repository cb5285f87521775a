#pragma once
// One raw connection a test opens early and keeps, so it can still talk to a
// Redis that refuses new clients (maxclients reached).

#include <hiredis/hiredis.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "redis_server.hpp"

namespace dlock::test {

struct AdminConnection {
  explicit AdminConnection(const dlock::test::RedisServer& redis) {
    timeval tv{2, 0};
    c = redisConnectWithTimeout(redis.host().c_str(), redis.port(), tv);
    REQUIRE(c != nullptr);
    REQUIRE(c->err == 0);
  }
  ~AdminConnection() { redisFree(c); }
  std::string run(const std::vector<std::string>& argv) {
    std::vector<const char*> parts;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      parts.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), parts.data(), lens.data()));
    if (reply == nullptr) return "(connection error)";
    std::string out = reply->type == REDIS_REPLY_INTEGER ? std::to_string(reply->integer)
                      : reply->str != nullptr        ? std::string(reply->str, reply->len)
                                                     : std::string("(other)");
    freeReplyObject(reply);
    return out;
  }
  redisContext* c = nullptr;
};

inline int connected_clients(AdminConnection& admin) {
  const std::string info = admin.run({"INFO", "clients"});
  const auto at = info.find("connected_clients:");
  REQUIRE(at != std::string::npos);
  return std::stoi(info.substr(at + 18));
}

inline long long info_field(AdminConnection& admin, const std::string& section, const std::string& field) {
  const std::string info = admin.run({"INFO", section});
  const auto at = info.find(field + ":");
  REQUIRE(at != std::string::npos);
  return std::stoll(info.substr(at + field.size() + 1));
}

}  // namespace dlock::test
