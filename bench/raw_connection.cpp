#include "raw_connection.hpp"

#include <stdexcept>

namespace bench {

RawConnection::RawConnection(const std::string& host, int port)
    : context_(redisConnect(host.c_str(), port)), address_(host + ":" + std::to_string(port)) {
  if (context_ == nullptr || context_->err) {
    const std::string why = context_ != nullptr ? context_->errstr : "out of memory";
    if (context_ != nullptr) redisFree(context_);
    throw std::runtime_error("redis " + address_ + ": cannot connect (" + why + ")");
  }
}

RawConnection::~RawConnection() { redisFree(context_); }

Reply RawConnection::call(int argc, const char** argv, const std::size_t* lens) {
  Reply reply(static_cast<redisReply*>(redisCommandArgv(context_, argc, argv, lens)));
  if (!reply) throw std::runtime_error("redis " + address_ + ": connection lost (" + context_->errstr + ")");
  if (reply->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error("redis " + address_ + ": " + std::string(reply->str, reply->len));
  }
  return reply;
}

std::string RawConnection::load(std::string_view source) {
  const char* argv[] = {"SCRIPT", "LOAD", source.data()};
  const std::size_t lens[] = {6, 4, source.size()};
  Reply reply = call(3, argv, lens);
  return std::string(reply->str, reply->len);
}

}  // namespace bench
