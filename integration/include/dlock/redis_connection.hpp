#pragma once
// One hiredis connection, set up as the config says: connect with the
// connect timeout, command timeout on the socket, AUTH (ACL user or plain
// password) and SELECT. Not thread-safe; the pool and the subscriber own them.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

struct redisContext;
struct redisReply;

namespace dlock::detail {

class RedisConnection {
 public:
  // Connects, authenticates and selects the database. Throws ConnectionError
  // naming host:port and the cause (refused, timed out, authentication failed).
  explicit RedisConnection(const RedisConfig& config);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Throws ConnectionError on a transport failure, after which broken() is true.
  RedisReply command(const RedisCommand& argv);
  RedisReply command(std::span<const std::string_view> argv);
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands);

  // Changes the command timeout for the calls that follow.
  void set_command_timeout(Millis timeout);

  // Once true the connection must be dropped, never reused: a transport
  // failure, a call that threw midway (its replies may still be on the way),
  // or a connection inherited across fork() (its socket is shared with the
  // other process). Dropping it only closes the socket; nothing is sent.
  bool broken() const;

  redisContext* context() { return context_; }  // for the subscriber's own I/O loop
  const std::string& endpoint() const { return endpoint_; }

  // Throws ConnectionError describing the context's error (used by the subscriber too).
  [[noreturn]] void fail(const std::string& during);

 private:
  template <typename Part>
  RedisReply send(std::span<const Part> argv);

  // Runs `call`; if it throws, the reply stream's state is unknown: marks the
  // connection broken before passing the exception on.
  template <typename Call>
  auto guarded(Call&& call);

  redisContext* context_ = nullptr;
  bool abandoned_ = false;  // a call threw midway; see broken()
  std::string formatted_;   // the command being sent, its buffer reused from call to call
  unsigned generation_;     // fork_generation() when connected
  std::string endpoint_;
  RedisConfig config_;
};

// Converts a hiredis reply tree (which stays owned by the caller).
RedisReply to_reply(const redisReply* reply);

}  // namespace dlock::detail
