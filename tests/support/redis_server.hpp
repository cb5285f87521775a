#pragma once
// A throwaway redis-server for one test: started on a free loopback port with
// a temporary directory and no persistence, stopped (and its directory
// removed) when the object goes away. Tests may stop, restart or kill it to
// inject faults. It also has a raw hiredis client of its own, independent of
// dlock's executor, for checking what dlock left in Redis.

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dlock/config.hpp"

namespace dlock::test {

// The certificates scripts/make_test_certs.sh makes, generated once per
// process into a temporary directory (removed at exit).
const std::filesystem::path& test_certificates();

// A server that speaks TLS only: port() is its tls-port, its plaintext port is off.
struct ServerTls {
  std::string certificate = "server";  // of test_certificates(): "server", "expired" or "wrong-name"
  bool auth_clients = false;           // demand a client certificate signed by client-ca.pem
};

class RedisServer {
 public:
  // extra_args are passed to redis-server as they are, e.g. {"--requirepass", "s3cret"}.
  explicit RedisServer(std::vector<std::string> extra_args = {}, std::optional<ServerTls> tls = std::nullopt);
  // As above, with a config file of `config_text` in the server's directory
  // given first (a Sentinel needs one, and rewrites it; it survives restarts).
  RedisServer(std::vector<std::string> extra_args, const std::string& config_text,
              std::optional<ServerTls> tls = std::nullopt);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }

  void stop();     // SIGTERM and wait
  void kill();     // SIGKILL and wait: a crash, no clean shutdown
  void start();    // (re)start on the same port
  bool running() const { return pid_ > 0; }
  // Freezes the server process (SIGSTOP) / lets it run again (SIGCONT): a
  // Redis that accepts connections but answers nothing, while its clock (and
  // so every lease in it) keeps running.
  void freeze();
  void thaw();
  pid_t pid() const { return pid_; }

  // Runs one command on a fresh connection and renders the reply as text:
  // an integer as its digits, a string as itself, nil as "(nil)", an error
  // as its message, an array as its elements joined by ' '.
  std::string run(const std::vector<std::string>& argv) const;

  // The last `lines` lines of the server's log: what a failed test shows of it.
  std::string log_tail(std::size_t lines) const;

  // A Config that points at this server, with short timeouts suited to tests;
  // for a TLS server with TLS on, trusting ca.pem (and, when it demands one,
  // presenting client.pem).
  Config config() const;

 private:
  void launch();
  bool answers_ping() const;

  std::string host_ = "127.0.0.1";
  int port_ = 0;
  pid_t pid_ = -1;
  std::filesystem::path dir_;
  std::vector<std::string> extra_args_;
  std::string config_file_;  // empty: none
  std::optional<ServerTls> tls_;
};

// A free TCP port on 127.0.0.1 at the moment of asking.
int free_loopback_port();

// The absolute path of a file in the source tree's config/ folder.
std::filesystem::path source_dir();

}  // namespace dlock::test
