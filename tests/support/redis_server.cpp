#include "redis_server.hpp"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"

namespace dlock::test {
namespace {

std::string render(const redisReply* reply) {
  if (reply == nullptr) return "(no reply)";
  switch (reply->type) {
    case REDIS_REPLY_INTEGER: return std::to_string(reply->integer);
    case REDIS_REPLY_NIL: return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string joined;
      for (size_t i = 0; i < reply->elements; ++i) {
        if (i) joined += ' ';
        joined += render(reply->element[i]);
      }
      return joined;
    }
    default: return std::string(reply->str, reply->len);
  }
}

std::string render(const RedisReply& reply) {
  switch (reply.type) {
    case RedisReply::Type::Integer: return std::to_string(reply.integer);
    case RedisReply::Type::Nil: return "(nil)";
    case RedisReply::Type::Array: {
      std::string joined;
      for (size_t i = 0; i < reply.elements.size(); ++i) {
        if (i) joined += ' ';
        joined += render(reply.elements[i]);
      }
      return joined;
    }
    default: return reply.str;
  }
}

struct CertificateDir {
  CertificateDir() {
    char pattern[] = "/tmp/dlock-test-certs-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
    const std::string command = (source_dir() / "scripts" / "make_test_certs.sh").string() + " " + path.string();
    if (std::system(command.c_str()) != 0) throw std::runtime_error("scripts/make_test_certs.sh failed; is openssl installed?");
  }
  ~CertificateDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::filesystem::path path;
};

}  // namespace

const std::filesystem::path& test_certificates() {
  static const CertificateDir made;
  return made.path;
}

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::filesystem::path source_dir() { return DLOCK_SOURCE_DIR; }

RedisServer::RedisServer(std::vector<std::string> extra_args, std::optional<ServerTls> tls)
    : RedisServer(std::move(extra_args), "", std::move(tls)) {}

RedisServer::RedisServer(std::vector<std::string> extra_args, const std::string& config_text,
                         std::optional<ServerTls> tls)
    : extra_args_(std::move(extra_args)), tls_(std::move(tls)) {
  char pattern[] = "/tmp/dlock-test-redis-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  if (!config_text.empty()) {
    config_file_ = (dir_ / "redis.conf").string();
    std::ofstream(config_file_) << config_text;
  }
  // Another test may grab the port between our probe and redis' bind: retry with a new one.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    launch();
    if (running()) return;
  }
  throw std::runtime_error("redis-server did not start; is the redis-server package installed?");
}

RedisServer::~RedisServer() {
  if (running()) kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::start() {
  if (running()) return;
  for (int attempt = 0; attempt < 20 && !running(); ++attempt) {
    launch();
    if (!running()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!running()) throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
}

void RedisServer::launch() {
  std::vector<std::string> args = {"redis-server"};
  if (!config_file_.empty()) args.push_back(config_file_);
  args.insert(args.end(), {"--port", std::to_string(port_), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", dir_.string(),
                                   // A replica writes the snapshot of a full sync to dump.rdb even with --save "";
                                   // a restart would load it and come up with old data, not empty: a killed
                                   // master back with a snapshot hundreds of grants old served a fencing
                                   // counter that went back (a Sentinel test, once, under TSan).
                                   "--rdb-del-sync-files", "yes",
                                   "--logfile", (dir_ / "redis.log").string(), "--daemonize", "no"});
  if (tls_) {
    const auto& certs = test_certificates();
    const std::vector<std::string> tls_args = {
        "--port", "0", "--tls-port", std::to_string(port_),
        "--tls-cert-file", (certs / (tls_->certificate + ".pem")).string(),
        "--tls-key-file", (certs / (tls_->certificate + ".key")).string(),
        "--tls-ca-cert-file", (certs / "client-ca.pem").string(),
        "--tls-auth-clients", tls_->auth_clients ? "yes" : "no"};
    args.insert(args.end(), tls_args.begin(), tls_args.end());
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken or bad arguments
      pid_ = -1;
      return;
    }
    if (answers_ping()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
}

bool RedisServer::answers_ping() const {
  if (tls_) {
    // Over dlock's own TLS transport, with verification off: an expired or misnamed certificate is up all the same.
    RedisConfig redis = config().redis;
    redis.tls.verify = false;
    redis.connect_timeout = Millis(200);
    try {
      dlock::detail::RedisConnection connection(redis);
      connection.command({"PING"});
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  timeval timeout{0, 200000};
  redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, timeout);
  if (c == nullptr) return false;
  bool up = false;
  if (!c->err) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    // A server with requirepass answers NOAUTH: it is up all the same.
    up = reply != nullptr;
    if (reply) freeReplyObject(reply);
  }
  redisFree(c);
  return up;
}

void RedisServer::freeze() {
  if (running()) ::kill(pid_, SIGSTOP);
}

void RedisServer::thaw() {
  if (running()) ::kill(pid_, SIGCONT);
}

void RedisServer::stop() {
  if (!running()) return;
  ::kill(pid_, SIGCONT);  // a frozen server must run to act on SIGTERM
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
}

void RedisServer::kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string RedisServer::log_tail(std::size_t lines) const {
  std::ifstream log(dir_ / "redis.log");
  std::deque<std::string> last;
  for (std::string line; std::getline(log, line);) {
    last.push_back(std::move(line));
    if (last.size() > lines) last.pop_front();
  }
  std::string text;
  for (const auto& line : last) text += line + "\n";
  return text;
}

std::string RedisServer::run(const std::vector<std::string>& argv) const {
  if (tls_) {
    RedisConfig redis = config().redis;
    redis.tls.verify = false;
    redis.connect_timeout = redis.command_timeout = Millis(2000);
    try {
      dlock::detail::RedisConnection connection(redis);
      return render(connection.command(argv));
    } catch (const ConnectionError& error) {
      throw std::runtime_error(std::string("test client cannot reach redis over TLS: ") + error.what());
    }
  }
  timeval timeout{2, 0};
  redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, timeout);
  if (c == nullptr || c->err) {
    std::string why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    throw std::runtime_error("test client cannot reach redis on port " + std::to_string(port_) + ": " + why);
  }
  redisSetTimeout(c, timeout);
  std::vector<const char*> parts;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    parts.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), parts.data(), lens.data()));
  std::string text = reply ? render(reply) : std::string("(connection error: ") + c->errstr + ")";
  if (reply) freeReplyObject(reply);
  redisFree(c);
  return text;
}

Config RedisServer::config() const {
  Config config;
  config.redis.host = host_;
  config.redis.port = port_;
  config.redis.connect_timeout = Millis(1000);
  config.redis.command_timeout = Millis(1000);
  config.redis.pool_size = 8;
  config.logging.level = "warn";
  // The suite's cases were written when lock() tried once by default, and a
  // case about a busy lock would now wait 10 s to say so: their services try
  // once unless the case gives a wait. The shipped default (10 s) has cases
  // of its own (tests/waiting/test_default_wait.cpp), on a fresh Config.
  config.lock.wait = Millis(0);
  if (tls_) {
    config.redis.tls.enabled = true;
    config.redis.tls.ca_file = (test_certificates() / "ca.pem").string();
    if (tls_->auth_clients) {
      config.redis.tls.cert_file = (test_certificates() / "client.pem").string();
      config.redis.tls.key_file = (test_certificates() / "client.key").string();
    }
  }
  return config;
}

}  // namespace dlock::test
