#pragma once
// One connection to a Redis server, set up as the config says: connect (and,
// with redis.tls, the TLS handshake) within the connect timeout, AUTH (ACL
// user or plain password) and SELECT. Commands are formatted by dlock
// (resp_command.hpp), sent through its own transport (plain TCP or TLS, one
// code path) and their replies parsed by hiredis' reader; each call must end
// within the command timeout (see set_command_timeout). Not thread-safe; the pool, the watchdog's
// reserved connection and the subscriber own them.

#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

struct redisReader;
struct redisReply;

namespace dlock::detail {

class Transport;
class TransportError;

class RedisConnection {
 public:
  // Connects, authenticates and selects the database. Throws ConnectionError
  // naming host:port and the cause (refused, timed out, authentication
  // failed, and with TLS: an untrusted, expired or misnamed certificate, a
  // plaintext server, a refused client certificate, an unreadable file).
  explicit RedisConnection(const RedisConfig& config);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Throws ConnectionError on a transport failure, after which broken() is true.
  RedisReply command(const RedisCommand& argv);
  RedisReply command(std::span<const std::string_view> argv);
  // Each reply has the command timeout of its own, counted from the one
  // before it: replies that come steadily (WAITs one after another) may take
  // longer in all. `give_up_at` bounds the whole call.
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands,
                                   std::chrono::steady_clock::time_point give_up_at =
                                       std::chrono::steady_clock::time_point::max());
  // As above, each command's parts views of the caller's strings, sent without a copy.
  std::vector<RedisReply> pipeline(std::span<const std::span<const std::string_view>> commands,
                                   std::chrono::steady_clock::time_point give_up_at);

  // For a caller that reads the reply later (RedisExecutor::start): sends one
  // command within the command timeout and returns the time by which its
  // reply is due; receive() reads it. Between the two the connection is the
  // caller's alone; if receive() is never called, call abandon().
  std::chrono::steady_clock::time_point send_command(std::span<const std::string_view> argv);
  RedisReply receive(std::chrono::steady_clock::time_point deadline);
  // receive() without waiting: the reply if it has all arrived, else none.
  std::optional<RedisReply> receive_if_arrived();
  // Marks the connection broken: a reply is still on its way on it.
  void abandon() { abandoned_ = true; }

  // Changes the command timeout for the calls that follow: a call (a reply
  // of a pipeline) gives up once it has passed, however its bytes trickle in
  // (or at the end of the one wait it falls in, of at most that length).
  void set_command_timeout(Millis timeout);

  // For the subscriber, whose thread waits on fd() together with its wake-up
  // fd and sends commands whose replies come later. Each throws
  // ConnectionError on a transport failure, after which broken() is true.
  void send_only(const std::vector<RedisCommand>& commands);  // within the command timeout
  std::optional<RedisReply> buffered_reply();  // a reply already read, or none; no I/O
  // Bytes received that poll() on fd() would not report (TLS keeps decrypted
  // bytes inside OpenSSL): call read_available() instead of sleeping.
  bool input_pending() const;
  bool read_available();  // reads what has arrived without waiting; whether anything did
  int fd() const;

  // For the pool: an idle connection has nothing to read, so input on it
  // means the server closed it (or the stream is out of step). No waiting.
  bool closed_while_idle();

  // Once true the connection must be dropped, never reused: a transport
  // failure, a call that threw midway (its replies may still be on the way),
  // a connection inherited across fork() (its socket is shared with the
  // other process), or one its EndpointSource has moved away from. Dropping it only closes the socket; nothing is sent (not
  // even TLS close_notify).
  bool broken() const;

  const std::string& endpoint() const { return endpoint_; }

  // Marks the connection broken and throws ConnectionError: nothing usable
  // came while `during` (the subscriber's PING that got no PONG).
  [[noreturn]] void fail(const std::string& during);

 private:
  template <typename Part>
  RedisReply send(std::span<const Part> argv);
  template <typename Commands>
  std::vector<RedisReply> run_pipeline(const Commands& commands, std::chrono::steady_clock::time_point give_up_at);
  // Formats and writes one command; returns the deadline of its reply.
  template <typename Part>
  std::chrono::steady_clock::time_point write_command(std::span<const Part> argv);

  // Runs `call`; if it throws, the reply stream's state is unknown: marks the
  // connection broken before passing the exception on, a TransportError
  // turned into a ConnectionError that names `during()`.
  template <typename Call, typename During>
  auto guarded(Call&& call, During&& during);

  void open(std::chrono::steady_clock::time_point deadline);
  // The next reply, reading until the deadline (TransportError after it).
  void* next_reply(std::chrono::steady_clock::time_point deadline);
  // The next reply if it is all in (the reader's buffer, then the socket without waiting); null if not.
  void* arrived_reply();
  std::chrono::steady_clock::time_point command_deadline() const;
  [[noreturn]] void throw_failure(const std::string& during, const TransportError& error);

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader_;
  bool abandoned_ = false;  // a call threw midway; see broken()
  bool answered_ = false;   // a reply came on this connection (see connection_failure.hpp)
  std::string formatted_;   // the command being sent, its buffer reused from call to call
  unsigned generation_;     // fork_generation() when connected
  std::uint64_t epoch_ = 0;  // config_.endpoint_source's epoch when connected
  std::string endpoint_;
  RedisConfig config_;
};

// The answer to a start-up PING: returns if it is not an error, else throws
// ConnectionError naming `endpoint`, an authentication failure as such, and
// any other refusal with `what_to_check` ("check that ...").
void check_pong(const RedisReply& pong, const std::string& endpoint, std::string_view what_to_check);

// Converts a hiredis reply tree (which stays owned by the caller).
RedisReply to_reply(const redisReply* reply);

}  // namespace dlock::detail
