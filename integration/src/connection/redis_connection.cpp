// One connection to Redis: connect, TLS, AUTH and SELECT; commands written and replies read
// by hiredis' reader within their deadlines, one at a time or pipelined; hiredis replies converted.
#include "dlock/redis_connection.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <memory>
#include <string_view>
#include <vector>

#include "connection/connection_failure.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"
#include "connection/resp_command.hpp"
#include "connection/socket_dial.hpp"
#include "tls/tls_context.hpp"
#include "connection/transport.hpp"

namespace dlock::detail {
namespace {

using Clock = std::chrono::steady_clock;

// As hiredis' own reads: enough for most replies in one call.
constexpr std::size_t kReadChunk = 16 * 1024;


void free_reader(redisReader* reader) {
  if (reader != nullptr) redisReaderFree(reader);
}

}  // namespace

RedisConnection::RedisConnection(const RedisConfig& config)
    : reader_(redisReaderCreate(), free_reader), generation_(fork_generation()), config_(config) {
  if (config_.endpoint_source) {
    // The epoch first: a move that happens meanwhile then marks this connection stale.
    epoch_ = config_.endpoint_source->epoch();
    const NodeAddress address = config_.endpoint_source->next();
    config_.host = address.host;
    config_.port = address.port;
  }
  endpoint_ = to_string(NodeAddress{config_.host, config_.port});
  if (!reader_) throw ConnectionError("redis " + endpoint_ + ": connecting failed (out of memory)");
  try {
    open(Clock::now() + config_.connect_timeout);
    if (!config_.password.empty() || !config_.username.empty()) {
      RedisCommand auth = {"AUTH"};
      if (!config_.username.empty()) auth.push_back(config_.username);
      auth.push_back(config_.password);
      const RedisReply answer = command(auth);
      if (answer.is_error()) throw AuthenticationError(describe_auth_refusal(endpoint_, answer.str));
    }
    if (config_.database != 0) {
      const RedisReply answer = command({"SELECT", std::to_string(config_.database)});
      if (answer.is_error()) {
        // Without a password a protected server refuses SELECT with NOAUTH.
        if (is_auth_refusal(answer.str)) throw AuthenticationError(describe_auth_refusal(endpoint_, answer.str));
        throw ConnectionError("redis " + endpoint_ + ": SELECT " + std::to_string(config_.database) + " refused (" +
                              answer.str + "); check redis.database");
      }
    }
  } catch (const AuthenticationError&) {
    if (transport_) transport_->abandon();
    throw;  // says already that nothing was sent
  } catch (const ConnectionError& e) {
    // A half-made connection says no goodbye; nothing of the caller's command was sent on it.
    if (transport_) transport_->abandon();
    throw ConnectionError(e.what(), false);
  } catch (...) {
    if (transport_) transport_->abandon();
    throw;
  }
}

void RedisConnection::open(Clock::time_point deadline) {
  // The TLS files first: a wrong path is reported whether or not the server is up.
  std::shared_ptr<SSL_CTX> tls = config_.tls.enabled ? tls_context(config_.tls, endpoint_) : nullptr;
  const char* during = "connecting";
  try {
    transport_ = std::make_unique<Transport>(dial(config_.host, config_.port, deadline));
    if (tls) {  // bounded by what is left of the connect timeout
      during = kDuringHandshake;
      transport_->start_tls(std::move(tls), config_.host, config_.tls, deadline);
    }
    transport_->limit_waits(config_.command_timeout);
  } catch (const TransportError& error) {
    throw_failure(during, error);
  }
}

RedisConnection::~RedisConnection() {
  if (transport_ && broken()) transport_->abandon();
}

void RedisConnection::set_command_timeout(Millis timeout) {
  config_.command_timeout = timeout;
  try {
    transport_->limit_waits(timeout);
  } catch (const TransportError& error) {
    throw_failure("setting the command timeout", error);
  }
}

bool RedisConnection::broken() const {
  return !transport_ || abandoned_ || generation_ != fork_generation() ||
         (config_.endpoint_source && config_.endpoint_source->epoch() != epoch_);
}

Clock::time_point RedisConnection::command_deadline() const {
  return Clock::now() + std::max(config_.command_timeout, Millis(1));
}

void RedisConnection::throw_failure(const std::string& during, const TransportError& error) {
  abandoned_ = true;
  throw ConnectionError(describe_failure(endpoint_, config_, during, error, answered_));
}

template <typename Call, typename During>
auto RedisConnection::guarded(Call&& call, During&& during) {
  try {
    return call();
  } catch (const TransportError& error) {
    throw_failure(during(), error);
  } catch (...) {
    abandoned_ = true;
    throw;
  }
}

void RedisConnection::fail(const std::string& during) {
  throw_failure(during, TransportError(TransportError::Kind::failed, "no reply"));
}

void* RedisConnection::next_reply(Clock::time_point deadline) {
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      throw TransportError(TransportError::Kind::garbled, reader_->errstr);
    }
    if (raw != nullptr) {
      answered_ = true;
      return raw;
    }
    char buffer[kReadChunk];
    const std::size_t got = transport_->read_some(buffer, sizeof buffer, deadline);
    if (redisReaderFeed(reader_.get(), buffer, got) != REDIS_OK) {
      throw TransportError(TransportError::Kind::garbled, reader_->errstr);
    }
  }
}

RedisReply RedisConnection::command(const RedisCommand& argv) { return send(std::span<const std::string>(argv)); }

RedisReply RedisConnection::command(std::span<const std::string_view> argv) { return send(argv); }

template <typename Part>
Clock::time_point RedisConnection::write_command(std::span<const Part> argv) {
  const auto deadline = command_deadline();
  format_resp_command(formatted_, argv);
  transport_->write_all(formatted_, deadline);
  return deadline;
}

template <typename Part>
RedisReply RedisConnection::send(std::span<const Part> argv) {
  if (argv.empty()) throw InvalidArgument("redis command is empty");
  return guarded(
      [&] {
        const auto deadline = write_command(argv);
        // Freed even if the conversion throws (out of memory).
        const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(next_reply(deadline)),
                                                                freeReplyObject);
        return to_reply(owned.get());
      },
      [&] { return "running " + std::string(argv.front()); });
}

Clock::time_point RedisConnection::send_command(std::span<const std::string_view> argv) {
  if (argv.empty()) throw InvalidArgument("redis command is empty");
  return guarded([&] { return write_command(argv); }, [&] { return "sending " + std::string(argv.front()); });
}

void* RedisConnection::arrived_reply() {
  // A whole reply is taken as soon as it is in, before reading on: a
  // server that closes right after its reply must not cost the reply.
  void* raw = nullptr;
  char buffer[kReadChunk];
  for (;;) {
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      throw TransportError(TransportError::Kind::garbled, reader_->errstr);
    }
    if (raw != nullptr) break;
    const std::size_t got = transport_->read_now(buffer, sizeof buffer);
    if (got == 0) return nullptr;
    if (redisReaderFeed(reader_.get(), buffer, got) != REDIS_OK) {
      throw TransportError(TransportError::Kind::garbled, reader_->errstr);
    }
  }
  answered_ = true;
  return raw;
}

std::optional<RedisReply> RedisConnection::receive_if_arrived() {
  return guarded(
      [&]() -> std::optional<RedisReply> {
        void* raw = arrived_reply();
        if (raw == nullptr) return std::nullopt;
        const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw), freeReplyObject);
        return to_reply(owned.get());
      },
      [] { return std::string("reading a reply"); });
}

RedisReply RedisConnection::receive(Clock::time_point deadline) {
  // A reply that arrived (while the caller read other servers', say) is
  // taken even past its deadline: the deadline bounds the wait, not the
  // reading. One blocking read takes it, with no try without waiting first
  // (a recv() more for every reply not yet in); if the deadline passes
  // before or during that read, what is in is still read without waiting
  // before the read counts as timed out.
  return guarded(
      [&] {
        void* raw = nullptr;
        try {
          raw = next_reply(deadline);
        } catch (const TransportError& error) {
          if (error.kind() != TransportError::Kind::timed_out) throw;
          raw = arrived_reply();
          if (raw == nullptr) throw;
        }
        const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw), freeReplyObject);
        return to_reply(owned.get());
      },
      [] { return std::string("reading a reply"); });
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<RedisCommand>& commands,
                                                  Clock::time_point give_up_at) {
  return run_pipeline(commands, give_up_at);
}

std::vector<RedisReply> RedisConnection::pipeline(std::span<const std::span<const std::string_view>> commands,
                                                  Clock::time_point give_up_at) {
  return run_pipeline(commands, give_up_at);
}

template <typename Commands>
std::vector<RedisReply> RedisConnection::run_pipeline(const Commands& commands, Clock::time_point give_up_at) {
  std::vector<RedisReply> replies;
  if (commands.empty()) return replies;
  // Checked before anything is sent: a command refused after others were
  // sent would leave their replies on the connection for the next caller.
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) {
      throw InvalidArgument("redis command " + std::to_string(i + 1) + " of " + std::to_string(commands.size()) +
                            " in a pipeline is empty; nothing was sent");
    }
  }
  return guarded(
      [&] {
        formatted_.clear();
        for (const auto& argv : commands) append_resp_command(formatted_, std::span(argv));
        transport_->write_all(formatted_, std::min(command_deadline(), give_up_at));
        replies.reserve(commands.size());
        for (std::size_t i = 0; i < commands.size(); ++i) {
          const auto deadline = std::min(command_deadline(), give_up_at);
          const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(next_reply(deadline)),
                                                                  freeReplyObject);
          replies.push_back(to_reply(owned.get()));
        }
        return std::move(replies);
      },
      [&] { return "running a pipeline of " + std::to_string(commands.size()) + " commands"; });
}

void RedisConnection::send_only(const std::vector<RedisCommand>& commands) {
  guarded(
      [&] {
        formatted_.clear();
        for (const auto& argv : commands) append_resp_command(formatted_, std::span<const std::string>(argv));
        transport_->write_all(formatted_, command_deadline());
      },
      [&] { return "sending " + (commands.empty() ? std::string("nothing") : commands.front().front()); });
}

std::optional<RedisReply> RedisConnection::buffered_reply() {
  return guarded(
      [&]() -> std::optional<RedisReply> {
        void* raw = nullptr;
        if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
          throw TransportError(TransportError::Kind::garbled, reader_->errstr);
        }
        if (raw == nullptr) return std::nullopt;
        answered_ = true;
        const std::unique_ptr<redisReply, void (*)(void*)> owned(static_cast<redisReply*>(raw), freeReplyObject);
        return to_reply(owned.get());
      },
      [] { return std::string("reading messages"); });
}

bool RedisConnection::input_pending() const { return transport_->pending(); }

int RedisConnection::fd() const { return transport_->fd(); }

bool RedisConnection::read_available() {
  return guarded(
      [&] {
        char buffer[kReadChunk];
        const std::size_t got = transport_->read_now(buffer, sizeof buffer);
        if (got > 0 && redisReaderFeed(reader_.get(), buffer, got) != REDIS_OK) {
          throw TransportError(TransportError::Kind::garbled, reader_->errstr);
        }
        return got > 0;
      },
      [] { return std::string("reading messages"); });
}

bool RedisConnection::closed_while_idle() {
  if (broken()) return true;
  if (!transport_->pending()) {
    pollfd watched{transport_->fd(), POLLIN, 0};
    if (::poll(&watched, 1, 0) == 0) return false;
  }
  try {
    char buffer[kReadChunk];
    // Nothing for the caller: TLS housekeeping (a session ticket) only.
    if (transport_->read_now(buffer, sizeof buffer) == 0) return false;
  } catch (const TransportError&) {
  }
  abandoned_ = true;
  return true;
}

void check_pong(const RedisReply& pong, const std::string& endpoint, std::string_view what_to_check) {
  if (!pong.is_error()) return;
  // A server with a password answers NOAUTH when none (or no user) was configured.
  if (pong.str.starts_with("NOAUTH")) throw AuthenticationError(describe_auth_refusal(endpoint, pong.str));
  if (!transient_state(pong).empty()) {
    throw ConnectionError("redis " + endpoint + ": PING answered " + pong.str + "; " +
                          std::string(kTransientStateAdvice));
  }
  throw ConnectionError("redis " + endpoint + ": PING answered with an error (" + pong.str + "); check that " +
                        std::string(what_to_check));
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
