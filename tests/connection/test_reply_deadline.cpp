// The command timeout bounds a whole call, also one whose reply trickles in
// a byte at a time (a slow or lossy link, a misbehaving middlebox): a review
// found that each byte started a fresh wait, and that over TLS SSL_read kept
// reading a record past any deadline. The promise (redis_connection.hpp): a
// call gives up at the command timeout, or at the end of the wait it falls in.
//
// The reproduction uses a loopback proxy in front of a real redis-server that,
// once told to, passes the server's bytes on one at a time, 200 ms apart.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// One connection at a time; server→client bytes trickle once `trickle` is set.
class TrickleProxy {
 public:
  explicit TrickleProxy(int target) : target_(target) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(0);
    REQUIRE(::bind(listen_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listen_, 8) == 0);
    socklen_t length = sizeof address;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_one(); });
  }
  ~TrickleProxy() {
    stop();
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    ::close(listen_);
    if (client_ >= 0) ::close(client_);
    if (server_ >= 0) ::close(server_);
  }
  int port() const { return port_; }
  void trickle(int ms) { trickle_ms_ = ms; }
  void stop() {
    if (stopping_.exchange(true)) return;
    ::shutdown(listen_, SHUT_RDWR);
    if (client_ >= 0) ::shutdown(client_, SHUT_RDWR);
    if (server_ >= 0) ::shutdown(server_, SHUT_RDWR);
  }

 private:
  void accept_one() {
    const int client = ::accept(listen_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(target_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      ::close(client);
      ::close(server);
      return;
    }
    client_ = client;
    server_ = server;
    pumps_.emplace_back([this] { pump(client_, server_, false); });
    pumps_.emplace_back([this] { pump(server_, client_, true); });
  }
  void pump(int from, int to, bool slow) {
    char buffer[16384];
    while (!stopping_) {
      pollfd watched{from, POLLIN, 0};
      if (::poll(&watched, 1, 50) <= 0) continue;
      const auto got = ::recv(from, buffer, sizeof buffer, 0);
      if (got <= 0) break;
      for (ssize_t i = 0; i < got && !stopping_;) {
        const int delay = slow ? trickle_ms_.load() : 0;
        if (delay == 0) {
          const auto sent = ::send(to, buffer + i, static_cast<size_t>(got - i), MSG_NOSIGNAL);
          if (sent <= 0) return;
          i += sent;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay));
          if (::send(to, buffer + i, 1, MSG_NOSIGNAL) != 1) return;
          ++i;
        }
      }
    }
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<int> client_{-1}, server_{-1};
  std::atomic<bool> stopping_{false};
  std::atomic<int> trickle_ms_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

// Runs GET of a 64-byte value through the proxy with the reply trickling;
// returns how long the call took before it returned or threw (or the limit, when it was still running then).
long long trickled_get_ms(dlock::test::RedisServer& redis, bool tls) {
  REQUIRE(redis.run({"SET", "trickled", std::string(64, 'x')}) == "OK");
  TrickleProxy proxy(redis.port());
  dlock::RedisConfig config = redis.config().redis;
  config.port = proxy.port();
  config.command_timeout = 1000ms;
  config.tls.enabled = tls;
  auto connection = std::make_unique<dlock::detail::RedisConnection>(config);
  REQUIRE(connection->command({"PING"}).str == "PONG");  // the handshake and session tickets are done
  proxy.trickle(200);
  const auto began = Clock::now();
  auto call = std::async(std::launch::async, [&] {
    try {
      connection->command({"GET", "trickled"});
    } catch (const dlock::ConnectionError&) {
    }
  });
  // The promise: the command timeout, plus at most one more wait (1 s) — 2 s. Give it 4 s.
  const bool ended = call.wait_for(4000ms) == std::future_status::ready;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
  proxy.stop();  // ends the call, if still running
  call.get();
  return ended ? took : -1;
}

}  // namespace

TEST_CASE("review: a reply trickling in over plaintext gives up at the command timeout", "[tls]") {
  dlock::test::RedisServer redis;
  const long long took = trickled_get_ms(redis, false);
  INFO("took " << took << " ms (-1: still running after 4 s with command_timeout 1000 ms)");
  CHECK(took >= 0);
}

TEST_CASE("review: a reply trickling in over TLS gives up at the command timeout", "[tls]") {
  dlock::test::RedisServer redis({}, dlock::test::ServerTls{});
  const long long took = trickled_get_ms(redis, true);
  INFO("took " << took << " ms (-1: still running after 4 s with command_timeout 1000 ms)");
  CHECK(took >= 0);
}

// A reply that is in is taken, whatever the deadline: the deadline bounds the
// wait, not the reading (a Redlock reads one node after another; a claimed
// release's reply is read before the acquisition's). receive() reads with one
// blocking recv(); a review found that a deadline passing between its start
// and that read threw away a reply that was in. Here the deadline has passed
// before receive() starts, which takes that same path every time.
TEST_CASE("receive() past its deadline takes a reply that is in, and gives up at once on one that is not",
          "[connection]") {
  for (const bool tls : {false, true}) {
    INFO((tls ? "TLS" : "plain TCP"));
    std::optional<dlock::test::ServerTls> server_tls;
    if (tls) server_tls.emplace();
    dlock::test::RedisServer redis({}, server_tls);
    dlock::RedisConfig config = redis.config().redis;
    config.command_timeout = 2000ms;
    dlock::detail::RedisConnection connection(config);
    REQUIRE(connection.command({"PING"}).str == "PONG");  // the handshake and session tickets are done

    const std::vector<std::string_view> echo = {"ECHO", "in already"};
    connection.send_command(echo);
    std::this_thread::sleep_for(100ms);  // the reply is in
    CHECK(connection.receive(Clock::now() - 1ms).str == "in already");
    CHECK_FALSE(connection.broken());

    // None in: a timeout at once. Had it waited, BLPOP's nil would have come after its 1 s.
    const std::vector<std::string_view> blocked = {"BLPOP", "never-pushed", "1"};
    connection.send_command(blocked);
    CHECK_THROWS_AS(connection.receive(Clock::now() - 1ms), dlock::ConnectionError);
    CHECK(connection.broken());
  }
}
