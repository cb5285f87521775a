#include "dlock/redis_connection.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <memory>
#include <string_view>
#include <vector>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "resp_command.hpp"

namespace dlock::detail {
namespace {

timeval to_timeval(Millis duration) {
  const auto ms = duration.count() > 0 ? duration.count() : 1;
  return timeval{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// hiredis only keeps strerror() text, so the cause is recognised by its words.
// A socket timeout shows up as EAGAIN because hiredis uses SO_RCVTIMEO.
bool is_timeout(std::string_view cause) {
  return contains(cause, "Resource temporarily unavailable") || contains(cause, "timed out");
}

bool is_lost(std::string_view cause) {
  return contains(cause, "Server closed the connection") || contains(cause, "reset by peer") ||
         contains(cause, "Broken pipe");
}

std::string describe_failure(const std::string& endpoint, const RedisConfig& config, const std::string& during,
                             const std::string& cause) {
  const std::string where = "redis " + endpoint + ": ";
  if (is_timeout(cause)) {
    const bool connecting = during == "connecting";
    const auto limit = connecting ? config.connect_timeout : config.command_timeout;
    return where + during + " timed out after " + std::to_string(limit.count()) +
           " ms; check that redis-server is running and reachable at redis.host:redis.port, or raise redis." +
           (connecting ? "connect_timeout_ms" : "command_timeout_ms") + " if it is only slow";
  }
  if (contains(cause, "Connection refused")) {
    return where + "connection refused; check redis.host and redis.port and that redis-server is running";
  }
  if (is_lost(cause)) {
    return where + "connection lost while " + during + " (" + cause +
           "); check that redis-server is running; the next call reconnects";
  }
  return where + during + " failed (" + cause + "); check redis.host and redis.port and that redis-server is running";
}

std::string describe_auth_refusal(const std::string& endpoint, const std::string& answer) {
  return "redis " + endpoint + ": authentication failed (" + answer + "); check redis.username and redis.password";
}

bool is_auth_refusal(std::string_view answer) {
  return answer.starts_with("NOAUTH") || answer.starts_with("WRONGPASS") || contains(answer, "invalid password") ||
         contains(answer, "invalid username-password pair");
}

}  // namespace

RedisConnection::RedisConnection(const RedisConfig& config)
    : generation_(fork_generation()), endpoint_(config.host + ":" + std::to_string(config.port)), config_(config) {
  context_ = redisConnectWithTimeout(config_.host.c_str(), config_.port, to_timeval(config_.connect_timeout));
  if (context_ == nullptr) throw ConnectionError("redis " + endpoint_ + ": connecting failed (out of memory)");
  // A throwing constructor runs no destructor, so the context is freed here.
  try {
    if (context_->err) fail("connecting");
    if (redisSetTimeout(context_, to_timeval(config_.command_timeout)) != REDIS_OK) fail("setting the command timeout");

    if (!config_.password.empty() || !config_.username.empty()) {
      RedisCommand auth = {"AUTH"};
      if (!config_.username.empty()) auth.push_back(config_.username);
      auth.push_back(config_.password);
      const RedisReply answer = command(auth);
      if (answer.is_error()) throw ConnectionError(describe_auth_refusal(endpoint_, answer.str));
    }
    if (config_.database != 0) {
      const RedisReply answer = command({"SELECT", std::to_string(config_.database)});
      if (answer.is_error()) {
        // Without a password a protected server refuses SELECT with NOAUTH.
        if (is_auth_refusal(answer.str)) throw ConnectionError(describe_auth_refusal(endpoint_, answer.str));
        throw ConnectionError("redis " + endpoint_ + ": SELECT " + std::to_string(config_.database) + " refused (" +
                              answer.str + "); check redis.database");
      }
    }
  } catch (...) {
    redisFree(context_);
    context_ = nullptr;
    throw;
  }
}

RedisConnection::~RedisConnection() {
  if (context_ != nullptr) redisFree(context_);
}

void RedisConnection::set_command_timeout(Millis timeout) {
  config_.command_timeout = timeout;
  if (redisSetTimeout(context_, to_timeval(timeout)) != REDIS_OK) fail("setting the command timeout");
}

bool RedisConnection::broken() const {
  return context_ == nullptr || context_->err != 0 || abandoned_ || generation_ != fork_generation();
}

template <typename Call>
auto RedisConnection::guarded(Call&& call) {
  try {
    return call();
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

void RedisConnection::fail(const std::string& during) {
  std::string cause = "no reply";
  if (context_ != nullptr && context_->err != 0) cause = context_->errstr;
  else if (context_ != nullptr) {
    // A NULL reply without an error flag leaves the stream in an unknown state:
    // mark the context so broken() tells the pool to drop it.
    context_->err = REDIS_ERR_OTHER;
  }
  throw ConnectionError(describe_failure(endpoint_, config_, during, cause));
}

RedisReply RedisConnection::command(const RedisCommand& argv) { return send(std::span<const std::string>(argv)); }

RedisReply RedisConnection::command(std::span<const std::string_view> argv) { return send(argv); }

template <typename Part>
RedisReply RedisConnection::send(std::span<const Part> argv) {
  if (argv.empty()) throw InvalidArgument("redis command is empty");
  return guarded([&] {
    format_resp_command(formatted_, argv);
    void* raw = nullptr;
    if (redisAppendFormattedCommand(context_, formatted_.data(), formatted_.size()) != REDIS_OK ||
        redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      fail("running " + std::string(argv.front()));
    }
    // Freed even if the conversion throws (out of memory).
    const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw), freeReplyObject);
    return to_reply(owned.get());
  });
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<RedisCommand>& commands) {
  std::vector<RedisReply> replies;
  if (commands.empty()) return replies;
  // Checked before anything is queued: a command refused after others were
  // queued would leave their replies on the connection for the next caller.
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) {
      throw InvalidArgument("redis command " + std::to_string(i + 1) + " of " + std::to_string(commands.size()) +
                            " in a pipeline is empty; nothing was sent");
    }
  }
  const std::string during = "running a pipeline of " + std::to_string(commands.size()) + " commands";
  return guarded([&] {
    for (const auto& argv : commands) {
      format_resp_command(formatted_, std::span<const std::string>(argv));
      if (redisAppendFormattedCommand(context_, formatted_.data(), formatted_.size()) != REDIS_OK) fail(during);
    }
    replies.reserve(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) fail(during);
      const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw), freeReplyObject);
      replies.push_back(to_reply(owned.get()));
    }
    return std::move(replies);
  });
}

RedisReply to_reply(const redisReply* reply) {
  RedisReply out;
  if (reply == nullptr) return out;
  switch (reply->type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::Integer;
      out.integer = reply->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::String;
      out.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::Status;
      out.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::Error;
      out.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::Array;
      out.elements.reserve(reply->elements);
      for (size_t i = 0; i < reply->elements; ++i) out.elements.push_back(to_reply(reply->element[i]));
      break;
    default:
      out.type = RedisReply::Type::Nil;
      break;
  }
  return out;
}

}  // namespace dlock::detail
