// YAML → Config: what a user writes in the file, what they get, and the
// messages they see when they get it wrong. No Redis server is needed.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include "dlock/config.hpp"
#include "dlock/errors.hpp"
#include "dlock/logging.hpp"
#include "redis_server.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// A directory of its own per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dlock-config-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  fs::path write(const std::string& yaml, const std::string& name = "cfg.yaml") const {
    const fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << yaml;
    return file;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Sets (or with nullopt unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The overrides cleared, so a developer's shell does not change the results.
struct NoOverrides {
  ScopedEnv host{"DLOCK_REDIS_HOST", std::nullopt};
  ScopedEnv port{"DLOCK_REDIS_PORT", std::nullopt};
  ScopedEnv password{"DLOCK_REDIS_PASSWORD", std::nullopt};
};

// The message of the ConfigError that loading `yaml` throws.
std::string error_of(const fs::path& file) {
  try {
    dlock::load_config(file);
  } catch (const dlock::ConfigError& e) {
    return e.what();
  }
  FAIL("load_config(" << file << ") did not throw ConfigError");
  return {};
}

std::string at(const fs::path& file, int line) { return file.string() + ":" + std::to_string(line) + ": "; }
// The prefix of a message about the file as a whole: no line.
std::string whole(const fs::path& file) { return file.string() + ": "; }

}  // namespace

TEST_CASE("an empty file gives the documented defaults") {
  NoOverrides env;
  TempDir dir;
  for (const std::string text : {"", "# only a comment\n", "---\n", "redis:\nlock:\n"}) {
    const auto config = dlock::load_config(dir.write(text));
    CHECK(config.redis.host == "127.0.0.1");
    CHECK(config.redis.port == 6379);
    CHECK(config.redis.username.empty());
    CHECK(config.redis.password.empty());
    CHECK(config.redis.database == 0);
    CHECK(config.redis.connect_timeout == dlock::Millis(1000));
    CHECK(config.redis.command_timeout == dlock::Millis(1000));
    CHECK(config.redis.pool_size == 8);
    CHECK(config.lock.key_prefix == "dlock:");
    CHECK(config.lock.watchdog_timeout == dlock::Millis(30000));
    CHECK(config.lock.wait == dlock::Millis(10000));
    CHECK(config.lock.max_key_bytes == 1024);
    CHECK(config.lock.async_io_threads == 1);
    CHECK(config.logging.level == "info");
  }
}

TEST_CASE("every setting in the file reaches the config") {
  NoOverrides env;
  TempDir dir;
  const auto config = dlock::load_config(dir.write(R"(
redis:
  host: redis.internal
  port: 6390
  username: app
  password: "p#ss: word"
  database: 3
  connect_timeout_ms: 250
  command_timeout_ms: 500
  pool_size: 16
lock:
  key_prefix: "shop:lock:"
  watchdog_timeout_ms: 10000
  wait_ms: 2500
  max_key_bytes: 64
  async_io_threads: 3
logging:
  level: DEBUG
)"));
  CHECK(config.redis.host == "redis.internal");
  CHECK(config.redis.port == 6390);
  CHECK(config.redis.username == "app");
  CHECK(config.redis.password == "p#ss: word");
  CHECK(config.redis.database == 3);
  CHECK(config.redis.connect_timeout == dlock::Millis(250));
  CHECK(config.redis.command_timeout == dlock::Millis(500));
  CHECK(config.redis.pool_size == 16);
  CHECK(config.lock.key_prefix == "shop:lock:");
  CHECK(config.lock.watchdog_timeout == dlock::Millis(10000));
  CHECK(config.lock.wait == dlock::Millis(2500));
  CHECK(config.lock.max_key_bytes == 64);
  CHECK(config.lock.async_io_threads == 3);
  CHECK(config.logging.level == "debug");
}

TEST_CASE("a setting written without a value keeps its default") {
  NoOverrides env;
  TempDir dir;
  const auto config = dlock::load_config(dir.write("redis:\n  port:\n  password: ~\n"));
  CHECK(config.redis.port == 6379);
  CHECK(config.redis.password.empty());
}

TEST_CASE("a redis url gives user, password, host, port and database") {
  NoOverrides env;
  TempDir dir;
  auto config = dlock::load_config(
      dir.write("redis:\n  url: redis://app:s%40cret@cache.local:6380/5\n  pool_size: 4\n"));
  CHECK(config.redis.username == "app");
  CHECK(config.redis.password == "s@cret");
  CHECK(config.redis.host == "cache.local");
  CHECK(config.redis.port == 6380);
  CHECK(config.redis.database == 5);
  CHECK(config.redis.pool_size == 4);

  config = dlock::load_config(dir.write("redis:\n  url: redis://:only-pass@10.0.0.7\n"));
  CHECK(config.redis.username.empty());
  CHECK(config.redis.password == "only-pass");
  CHECK(config.redis.host == "10.0.0.7");
  CHECK(config.redis.port == 6379);
  CHECK(config.redis.database == 0);

  config = dlock::load_config(dir.write("redis:\n  url: redis://[::1]:7000\n"));
  CHECK(config.redis.host == "::1");
  CHECK(config.redis.port == 7000);
}

TEST_CASE("a ${VAR} in a redis url is put into its part as it is, after the url is split") {
  NoOverrides env;
  // '%41' must stay itself (not 'A'), '#' and '?' must not end the url, '@', '/' and ':' split nothing.
  ScopedEnv password("DLOCK_TEST_URL_PASSWORD", "p%41ss#wo?rd@x/y:z");
  ScopedEnv user("DLOCK_TEST_URL_USER", "ops:team");
  ScopedEnv host("DLOCK_TEST_URL_HOST", "cache.local");
  ScopedEnv port("DLOCK_TEST_URL_PORT", "6390");
  TempDir dir;
  const auto config = dlock::load_config(dir.write(
      "redis:\n  url: redis://${DLOCK_TEST_URL_USER}:${DLOCK_TEST_URL_PASSWORD}@${DLOCK_TEST_URL_HOST}:"
      "${DLOCK_TEST_URL_PORT}/${DLOCK_TEST_URL_DB:-3}\n"));
  CHECK(config.redis.password == "p%41ss#wo?rd@x/y:z");
  CHECK(config.redis.username == "ops:team");
  CHECK(config.redis.host == "cache.local");
  CHECK(config.redis.port == 6390);
  CHECK(config.redis.database == 3);
  // Text written in the url itself is still url syntax: percent-decoded.
  CHECK(dlock::load_config(dir.write("redis:\n  url: redis://:a%41${DLOCK_TEST_URL_PASSWORD}@h\n")).redis.password ==
        "aAp%41ss#wo?rd@x/y:z");
  // A port from a variable is checked as a port.
  ScopedEnv bad_port("DLOCK_TEST_URL_PORT", "63x0");
  const auto file = dir.write("redis:\n  url: redis://h:${DLOCK_TEST_URL_PORT}\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "redis.url: the port: expected a port number"));
}

TEST_CASE("$${ writes a literal ${ in any value, the url included") {
  NoOverrides env;
  ScopedEnv unset("DLOCK_TEST_UNSET", std::nullopt);
  TempDir dir;
  auto config = dlock::load_config(dir.write("redis:\n  password: \"a$${DLOCK_TEST_UNSET}b$c\"\n"));
  CHECK(config.redis.password == "a${DLOCK_TEST_UNSET}b$c");
  config = dlock::load_config(dir.write("redis:\n  url: \"redis://:x$${y}@h\"\n"));
  CHECK(config.redis.password == "x${y}");
}

TEST_CASE("a redis url together with host is refused") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write("redis:\n  url: redis://cache.local\n  host: other\n");
  const auto message = error_of(file);
  CHECK_THAT(message, StartsWith(at(file, 3) + "redis.host: cannot be combined with redis.url (line 2)"));
  CHECK_THAT(message, Contains("use one or the other"));
}

TEST_CASE("a rediss url turns TLS on") {
  NoOverrides env;
  TempDir dir;
  const auto config = dlock::load_config(dir.write("redis:\n  url: rediss://u:secret@cache.local:6380\n"));
  CHECK(config.redis.tls.enabled);
  CHECK(config.redis.tls.verify);
  CHECK(config.redis.host == "cache.local");
  CHECK(config.redis.port == 6380);
}

TEST_CASE("the deployment sections are read with their defaults") {
  NoOverrides env;
  TempDir dir;
  const auto defaults = dlock::load_config(dir.write(""));
  CHECK(defaults.redis.mode == dlock::RedisMode::standalone);
  CHECK_FALSE(defaults.redis.tls.enabled);
  CHECK(defaults.redis.sentinel.master_name == "mymaster");
  CHECK(defaults.lock.replica_acks == 0);
  CHECK(defaults.lock.replica_ack_timeout == dlock::Millis(100));

  const auto sentinel = dlock::load_config(dir.write(
      "redis:\n  mode: sentinel\n  password: pw\n  sentinel:\n    master_name: orders\n"
      "    nodes: [\"127.0.0.1:26379\", \"[::1]:26380\"]\n    password: spw\n"
      "  tls:\n    enabled: yes\n    ca_file: /etc/ca.pem\n    cert_file: c.pem\n    key_file: k.pem\n"
      "    server_name: redis.internal\n    verify: true\n"
      "lock:\n  replica_acks: 1\n  replica_ack_timeout_ms: 250\n"));
  CHECK(sentinel.redis.mode == dlock::RedisMode::sentinel);
  CHECK(sentinel.redis.sentinel.master_name == "orders");
  REQUIRE(sentinel.redis.sentinel.nodes.size() == 2);
  CHECK(sentinel.redis.sentinel.nodes[0] == dlock::NodeAddress{"127.0.0.1", 26379});
  CHECK(sentinel.redis.sentinel.nodes[1] == dlock::NodeAddress{"::1", 26380});
  CHECK(dlock::to_string(sentinel.redis.sentinel.nodes[1]) == "[::1]:26380");
  CHECK(sentinel.redis.sentinel.password == "spw");
  CHECK(sentinel.redis.tls.enabled);
  CHECK(sentinel.redis.tls.ca_file == "/etc/ca.pem");
  CHECK(sentinel.redis.tls.server_name == "redis.internal");
  CHECK(sentinel.lock.replica_acks == 1);
  CHECK(sentinel.lock.replica_ack_timeout == dlock::Millis(250));

  // One value with commas, so that one ${VAR} can carry the whole list.
  const auto cluster = dlock::load_config(
      dir.write("redis:\n  mode: cluster\n  cluster:\n    nodes: \"127.0.0.1:7000, 127.0.0.1:7001\"\n"));
  CHECK(cluster.redis.mode == dlock::RedisMode::cluster);
  REQUIRE(cluster.redis.cluster.nodes.size() == 2);
  CHECK(cluster.redis.cluster.nodes[1] == dlock::NodeAddress{"127.0.0.1", 7001});
}

TEST_CASE("deployment settings that contradict each other are refused with the line and what to do") {
  NoOverrides env;
  TempDir dir;
  const auto no_mode = dir.write("redis:\n  sentinel:\n    nodes: [\"127.0.0.1:26379\"]\n");
  CHECK_THAT(error_of(no_mode), StartsWith(at(no_mode, 2) + "redis.sentinel: is set but redis.mode is standalone; "
                                                             "add `mode: sentinel` under redis"));
  const auto no_nodes = dir.write("redis:\n  mode: cluster\n");
  CHECK_THAT(error_of(no_nodes), StartsWith(at(no_nodes, 2) + "redis.cluster.nodes: must list at least one"));
  const auto host_too = dir.write("redis:\n  mode: sentinel\n  host: 10.0.0.1\n  sentinel:\n    nodes: [\"h:1\"]\n");
  CHECK_THAT(error_of(host_too), StartsWith(at(host_too, 3) + "redis.host: not used when redis.mode is sentinel"));
  const auto half_cert = dir.write("redis:\n  tls:\n    enabled: true\n    cert_file: c.pem\n");
  CHECK_THAT(error_of(half_cert), StartsWith(at(half_cert, 4) + "redis.tls.cert_file: is set without redis.tls.key_file"));
  const auto tls_off = dir.write("redis:\n  tls:\n    ca_file: ca.pem\n");
  CHECK_THAT(error_of(tls_off), StartsWith(at(tls_off, 3) + "redis.tls.ca_file: is set but TLS is off"));
  const auto bad_mode = dir.write("redis:\n  mode: raft\n");
  CHECK_THAT(error_of(bad_mode), StartsWith(at(bad_mode, 2) + "redis.mode: \"raft\" is not a mode; use standalone, "
                                                               "sentinel, cluster or redlock"));
  const auto bad_node = dir.write("redis:\n  mode: cluster\n  cluster:\n    nodes: [\"127.0.0.1\"]\n");
  CHECK_THAT(error_of(bad_node), StartsWith(at(bad_node, 4) + "redis.cluster.nodes: expected host:port"));
  const auto bad_bool = dir.write("redis:\n  tls:\n    verify: maybe\n");
  CHECK_THAT(error_of(bad_bool), StartsWith(at(bad_bool, 3) + "redis.tls.verify: expected true or false"));
  const auto unknown = dir.write("redis:\n  tls:\n    ca_fle: x\n");
  CHECK_THAT(error_of(unknown), StartsWith(at(unknown, 3) + "redis.tls.ca_fle: unknown setting (did you mean ca_file?)"));
  const auto slow_wait =
      dir.write("redis:\n  command_timeout_ms: 100\nlock:\n  replica_acks: 1\n  replica_ack_timeout_ms: 100\n");
  CHECK_THAT(error_of(slow_wait), StartsWith(at(slow_wait, 5) + "lock.replica_ack_timeout_ms: 100 ms must be shorter "
                                                                "than redis.command_timeout_ms (100 ms)"));
  const auto acks = dir.write("lock:\n  replica_acks: -1\n");
  CHECK_THAT(error_of(acks), StartsWith(at(acks, 2) + "lock.replica_acks: -1 is out of range 0..100"));
}

TEST_CASE("a redlock section gives its nodes and restarted-node delay") {
  NoOverrides env;
  TempDir dir;
  const auto redlock = dlock::load_config(dir.write(
      "redis:\n  mode: redlock\n  password: pw\n  database: 2\n  redlock:\n"
      "    nodes: [\"10.0.0.1:6379\", \"10.0.0.2:6379\", \"[::1]:6381\"]\n    restarted_node_delay_ms: 60000\n"
      "lock:\n  watchdog_timeout_ms: 45000\n"));
  CHECK(redlock.redis.mode == dlock::RedisMode::redlock);
  CHECK(std::string(dlock::mode_name(redlock.redis.mode)) == "redlock");
  REQUIRE(redlock.redis.redlock.nodes.size() == 3);
  CHECK(redlock.redis.redlock.nodes[0] == dlock::NodeAddress{"10.0.0.1", 6379});
  CHECK(redlock.redis.redlock.nodes[2] == dlock::NodeAddress{"::1", 6381});
  CHECK(redlock.redis.redlock.restarted_node_delay == dlock::Millis(60000));
  CHECK(redlock.redis.password == "pw");
  CHECK(redlock.redis.database == 2);

  // One value with commas, as for cluster.nodes; the delay defaults to 30000, and 0 is for nodes that fsync always.
  const auto defaults = dlock::load_config(dir.write(
      "redis:\n  mode: redlock\n  redlock:\n    nodes: \"h1:6379, h2:6379, h3:6379, h4:6379, h5:6379\"\n"));
  CHECK(defaults.redis.redlock.nodes.size() == 5);
  CHECK(defaults.redis.redlock.restarted_node_delay == dlock::Millis(30000));
  const auto fsync_always = dlock::load_config(
      dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: [\"h1:1\", \"h2:1\", \"h3:1\"]\n"
                "    restarted_node_delay_ms: 0\nlock:\n  watchdog_timeout_ms: 60000\n"));
  CHECK(fsync_always.redis.redlock.restarted_node_delay == dlock::Millis(0));
}

TEST_CASE("a redlock node count without a clear majority is refused with the count and what to give") {
  NoOverrides env;
  TempDir dir;
  const auto even = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: [\"h1:1\", \"h2:1\", \"h3:1\", \"h4:1\"]\n");
  CHECK_THAT(error_of(even), StartsWith(at(even, 4) + "redis.redlock.nodes: lists 4 nodes; give an odd number of "
                                                      "independent masters, 3 or more, so that a majority is well "
                                                      "defined"));
  const auto one = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: \"h1:1\"\n");
  CHECK_THAT(error_of(one), StartsWith(at(one, 4) + "redis.redlock.nodes: lists 1 node; give an odd number") &&
                                Contains("3 or more"));
  std::string many;
  for (int port = 1; port <= 17; ++port) many += (many.empty() ? "" : ",") + std::string("h:") + std::to_string(port);
  const auto too_many = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: \"" + many + "\"\n");
  CHECK_THAT(error_of(too_many), StartsWith(at(too_many, 4) + "redis.redlock.nodes: lists 17 nodes; use at most 15") &&
                                     Contains("goes to all the nodes"));
  const auto none = dir.write("redis:\n  mode: redlock\n");
  CHECK_THAT(error_of(none), StartsWith(at(none, 2) + "redis.redlock.nodes: must list the independent masters"));
}

TEST_CASE("a redlock node listed twice is refused, naming it") {
  NoOverrides env;
  TempDir dir;
  const auto twice = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: [\"h1:6379\", \"h2:6379\", \"h1:6379\"]\n");
  CHECK_THAT(error_of(twice), StartsWith(at(twice, 4) + "redis.redlock.nodes: h1:6379 is listed twice") &&
                                  Contains("count twice toward the majority"));
  // Host names are compared without regard to case; another port is another server.
  const auto cased = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: \"Redis-A:1, b:1, redis-a:1\"\n");
  CHECK_THAT(error_of(cased), StartsWith(at(cased, 4) + "redis.redlock.nodes: redis-a:1 is listed twice"));
  CHECK(dlock::load_config(dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: \"h:1, h:2, h:3\"\n"))
            .redis.redlock.nodes.size() == 3);
}

TEST_CASE("a redlock restarted-node delay must cover the longest lease") {
  NoOverrides env;
  TempDir dir;
  const std::string nodes = "redis:\n  mode: redlock\n  redlock:\n    nodes: [\"h1:1\", \"h2:1\", \"h3:1\"]\n";
  const auto negative = dir.write(nodes + "    restarted_node_delay_ms: -1\n");
  CHECK(error_of(negative) == at(negative, 5) + "redis.redlock.restarted_node_delay_ms: -1 is out of range 0..86400000");
  const auto word = dir.write(nodes + "    restarted_node_delay_ms: soon\n");
  CHECK_THAT(error_of(word), StartsWith(at(word, 5) + "redis.redlock.restarted_node_delay_ms: expected an integer "
                                                      "number of milliseconds"));
  const auto short_delay = dir.write(nodes + "    restarted_node_delay_ms: 10000\nlock:\n  watchdog_timeout_ms: 20000\n");
  const auto message = error_of(short_delay);
  CHECK_THAT(message, StartsWith(at(short_delay, 5) + "redis.redlock.restarted_node_delay_ms: 10000 ms is shorter than "
                                                      "lock.watchdog_timeout_ms (20000 ms)"));
  CHECK_THAT(message, Contains("at least the longest lease") && Contains("appendfsync always"));
  // The default delay (30000) is too short for a longer lease: the message points at the lease's line.
  const auto long_lease = dir.write(nodes + "lock:\n  watchdog_timeout_ms: 60000\n");
  CHECK_THAT(error_of(long_lease), StartsWith(at(long_lease, 6) + "redis.redlock.restarted_node_delay_ms: 30000 ms is "
                                                                  "shorter than lock.watchdog_timeout_ms (60000 ms)"));
}

TEST_CASE("replica acknowledgement is refused in redlock mode: its nodes are independent masters") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write("redis:\n  mode: redlock\n  redlock:\n    nodes: [\"h1:1\", \"h2:1\", \"h3:1\"]\n"
                              "lock:\n  replica_acks: 1\n");
  const auto message = error_of(file);
  CHECK_THAT(message, StartsWith(at(file, 6) + "lock.replica_acks: is 1 but must be 0 when redis.mode is redlock"));
  CHECK_THAT(message, Contains("independent masters") && Contains("remove lock.replica_acks"));
}

TEST_CASE("a redlock section in another mode, and url, host or port in redlock mode, are refused") {
  NoOverrides env;
  TempDir dir;
  const std::string section = "  redlock:\n    nodes: [\"h1:1\", \"h2:1\", \"h3:1\"]\n";
  const auto standalone = dir.write("redis:\n  host: h\n" + section);
  CHECK_THAT(error_of(standalone), StartsWith(at(standalone, 3) + "redis.redlock: is set but redis.mode is standalone; "
                                                                  "add `mode: redlock` under redis, or remove "
                                                                  "redis.redlock"));
  const auto cluster = dir.write("redis:\n  mode: cluster\n  cluster:\n    nodes: [\"h:7000\"]\n" + section);
  CHECK_THAT(error_of(cluster), StartsWith(at(cluster, 5) + "redis.redlock: is set but redis.mode is cluster"));
  const auto host = dir.write("redis:\n  mode: redlock\n  host: 10.0.0.1\n" + section);
  CHECK_THAT(error_of(host), StartsWith(at(host, 3) + "redis.host: not used when redis.mode is redlock (the servers "
                                                      "come from redis.redlock.nodes)"));
  const auto url = dir.write("redis:\n  mode: redlock\n  url: redis://:pw@10.0.0.1\n" + section);
  CHECK_THAT(error_of(url), StartsWith(at(url, 3) + "redis.url: not used when redis.mode is redlock"));
  const auto unknown = dir.write("redis:\n  mode: redlock\n" + section + "    restart_delay_ms: 1\n");
  CHECK_THAT(error_of(unknown), StartsWith(at(unknown, 5) + "redis.redlock.restart_delay_ms: unknown setting") &&
                                    Contains("nodes, restarted_node_delay_ms"));
}

TEST_CASE("a malformed redis url names the part that is wrong") {
  TempDir dir;
  const auto file = dir.write("redis:\n  url: redis://cache.local:http\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "redis.url: the port: expected a port number"));
}

TEST_CASE("${VAR} and ${VAR:-default} are expanded in values") {
  NoOverrides env;
  ScopedEnv host("DLOCK_TEST_HOST", "from-env");
  ScopedEnv unset("DLOCK_TEST_UNSET", std::nullopt);
  ScopedEnv empty("DLOCK_TEST_EMPTY", "");
  TempDir dir;
  const auto config = dlock::load_config(dir.write(R"(
redis:
  host: ${DLOCK_TEST_HOST}
  port: ${DLOCK_TEST_UNSET:-6391}
  username: ${DLOCK_TEST_EMPTY:-fallback}
  password: "a#b:${DLOCK_TEST_HOST}$"
lock:
  key_prefix: "${DLOCK_TEST_EMPTY:-app}:${DLOCK_TEST_HOST}:"
)"));
  CHECK(config.redis.host == "from-env");
  CHECK(config.redis.port == 6391);
  CHECK(config.redis.username == "fallback");
  CHECK(config.redis.password == "a#b:from-env$");
  CHECK(config.lock.key_prefix == "app:from-env:");
}

TEST_CASE("an unset ${VAR} without default names the variable and the setting") {
  ScopedEnv unset("DLOCK_TEST_UNSET", std::nullopt);
  TempDir dir;
  const auto file = dir.write("redis:\n  host: h\n  password: ${DLOCK_TEST_UNSET}\n");
  const auto message = error_of(file);
  CHECK_THAT(message, StartsWith(at(file, 3) + "redis.password: environment variable DLOCK_TEST_UNSET is not set"));
  CHECK_THAT(message, Contains("${DLOCK_TEST_UNSET:-default}"));
}

TEST_CASE("DLOCK_REDIS_HOST, PORT and PASSWORD override the file") {
  TempDir dir;
  const auto file = dir.write("redis:\n  host: from-file\n  port: 6000\n  password: file-secret\n");
  {
    ScopedEnv host("DLOCK_REDIS_HOST", "from-env");
    ScopedEnv port("DLOCK_REDIS_PORT", "6401");
    ScopedEnv password("DLOCK_REDIS_PASSWORD", "env-secret");
    const auto config = dlock::load_config(file);
    CHECK(config.redis.host == "from-env");
    CHECK(config.redis.port == 6401);
    CHECK(config.redis.password == "env-secret");
  }
  // Empty counts as unset, so an exported-but-blank variable cannot wipe the file's value.
  ScopedEnv host("DLOCK_REDIS_HOST", "");
  ScopedEnv port("DLOCK_REDIS_PORT", "");
  ScopedEnv password("DLOCK_REDIS_PASSWORD", "");
  const auto config = dlock::load_config(file);
  CHECK(config.redis.host == "from-file");
  CHECK(config.redis.port == 6000);
  CHECK(config.redis.password == "file-secret");
}

TEST_CASE("a bad DLOCK_REDIS_PORT names that variable") {
  NoOverrides env;
  ScopedEnv port("DLOCK_REDIS_PORT", "six");
  TempDir dir;
  const auto file = dir.write("");
  const auto message = error_of(file);
  CHECK_THAT(message, StartsWith(whole(file) + "environment variable DLOCK_REDIS_PORT"));
  CHECK_THAT(message, Contains("\"six\""));
}

TEST_CASE("a signed DLOCK_REDIS_PORT is refused, naming the variable") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write("");
  for (const char* text : {"+6379", "-1", " 6379", "6379 "}) {
    ScopedEnv port("DLOCK_REDIS_PORT", text);
    INFO("DLOCK_REDIS_PORT=" << text);
    const auto message = error_of(file);
    CHECK_THAT(message, StartsWith(whole(file) + "environment variable DLOCK_REDIS_PORT"));
    CHECK_THAT(message, Contains("no sign"));
    // The same rule without a file (the dlock command's built-in defaults).
    dlock::Config config;
    CHECK_THROWS_WITH(dlock::apply_environment_overrides(config), Contains("DLOCK_REDIS_PORT") && Contains("no sign"));
  }
}

TEST_CASE("a missing file is reported with its path, at no line") {
  TempDir dir;
  const auto file = dir.path() / "absent.yaml";
  CHECK(error_of(file) == whole(file) +
                              "cannot open the config file: No such file or directory; check the "
                              "path given for the dlock config");
}

TEST_CASE("a path that cannot be read as a file is reported") {
  // A directory: root ignores file permissions, so chmod 000 would not fail.
  TempDir dir;
  CHECK_THAT(error_of(dir.path()), StartsWith(whole(dir.path()) + "cannot read the config file: Is a directory"));
}

TEST_CASE("a file over 1 MiB is refused") {
  TempDir dir;
  const auto file = dir.write("# " + std::string(1024 * 1024, 'x') + "\n");
  CHECK_THAT(error_of(file), StartsWith(whole(file) + "the config is larger than 1 MiB"));
}

TEST_CASE("malformed YAML is reported at its line") {
  TempDir dir;
  const auto file = dir.write("redis:\n  host: a\n  port: [1,\nlock:\n  wait_ms: 1\n");
  const auto message = error_of(file);
  CHECK_THAT(message, Contains(": malformed YAML: "));
  CHECK_THAT(message, StartsWith(file.string() + ":"));
  const auto bad_indent = dir.write("redis:\n  host: a\n    port: 1\n", "indent.yaml");
  CHECK_THAT(error_of(bad_indent), StartsWith(at(bad_indent, 3) + "malformed YAML: "));
  const auto tab = dir.write("redis:\n\thost: a\n", "tab.yaml");
  CHECK_THAT(error_of(tab), StartsWith(at(tab, 2) + "malformed YAML: ") &&
                                Contains("indented with a tab; YAML allows only spaces"));
  const auto two = dir.write("lock:\n  wait_ms: 1\n---\nlock:\n  wait_ms: 2\n", "two.yaml");
  CHECK_THAT(error_of(two), StartsWith(at(two, 3) + "a second YAML document"));  // the "---" line
}

TEST_CASE("an unknown setting lists the known ones and suggests the likely one") {
  TempDir dir;
  const auto file = dir.write("redis:\n  hots: 127.0.0.1\n");
  const auto message = error_of(file);
  CHECK_THAT(message, StartsWith(at(file, 2) + "redis.hots: unknown setting (did you mean host?)"));
  CHECK_THAT(message, Contains("known settings in redis: mode, url, host, port, username, password"));
}

TEST_CASE("an unknown section lists the known ones") {
  TempDir dir;
  const auto file = dir.write("lock:\n  wait_ms: 1\nlogs:\n  level: info\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 3) + "logs: unknown section (did you mean lock?); "
                                                      "known sections: redis, lock, logging"));
}

TEST_CASE("a section that is not a map is refused") {
  TempDir dir;
  const auto file = dir.write("redis: localhost\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 1) + "redis: expected a map of settings"));
  const auto list = dir.write("- redis\n", "list.yaml");
  CHECK_THAT(error_of(list), StartsWith(at(list, 1) + "expected a map of sections"));
}

TEST_CASE("a map or list where a value belongs is refused") {
  TempDir dir;
  const auto file = dir.write("redis:\n  host:\n    name: a\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "redis.host: expected a single value, got a map"));
  const auto list = dir.write("lock:\n  wait_ms: [1, 2]\n", "list.yaml");
  CHECK_THAT(error_of(list), StartsWith(at(list, 2) + "lock.wait_ms: expected a single value, got a list"));
}

TEST_CASE("a word or a boolean where a number belongs is refused") {
  TempDir dir;
  auto file = dir.write("lock:\n  key_prefix: x\n\n  wait_ms: soon\n");
  CHECK(error_of(file) ==
        at(file, 4) + "lock.wait_ms: expected an integer number of milliseconds, got \"soon\"");
  file = dir.write("redis:\n  port: true\n");
  CHECK(error_of(file) == at(file, 2) + "redis.port: expected a port number, got \"true\"");
  file = dir.write("redis:\n  pool_size: 2.5\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "redis.pool_size: expected a number of connections"));
}

TEST_CASE("a key_prefix with a brace is refused: it would take the place of the lock's hash tag") {
  TempDir dir;
  const auto file = dir.write("lock:\n  key_prefix: \"app{}:\"\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "lock.key_prefix: holds a brace"));
}

TEST_CASE("out-of-range, negative and overflowing numbers are refused with the range") {
  TempDir dir;
  auto file = dir.write("redis:\n  host: h\n  port: 70000\n");
  CHECK(error_of(file) == at(file, 3) + "redis.port: 70000 is out of range 1..65535");
  file = dir.write("redis:\n  port: 99999999999999999999\n");
  CHECK(error_of(file) == at(file, 2) + "redis.port: 99999999999999999999 is out of range 1..65535");
  file = dir.write("lock:\n  wait_ms: -1\n");
  CHECK(error_of(file) == at(file, 2) + "lock.wait_ms: -1 is out of range 0..86400000");
  file = dir.write("lock:\n  watchdog_timeout_ms: 50\n");
  CHECK(error_of(file) == at(file, 2) + "lock.watchdog_timeout_ms: 50 is out of range 100..86400000");
  file = dir.write("redis:\n  pool_size: 0\n");
  CHECK(error_of(file) == at(file, 2) + "redis.pool_size: 0 is out of range 1..1024");
  file = dir.write("lock:\n  async_io_threads: 0\n");
  CHECK(error_of(file) == at(file, 2) + "lock.async_io_threads: 0 is out of range 1..64");
}

TEST_CASE("lock.metrics sets the gauges' breakdown by key prefix and keeps its bound") {
  NoOverrides env;
  TempDir dir;
  const auto defaults = dlock::load_config(dir.write("lock:\n  wait_ms: 0\n"));
  CHECK_FALSE(defaults.lock.metrics.breaks_down_by_key_prefix());
  CHECK(defaults.lock.metrics.max_key_prefixes == 20);
  const auto config = dlock::load_config(dir.write(
      "lock:\n  metrics:\n    key_prefixes: [\"order:\", \"stock:\"]\n    key_prefix_separator: \":\"\n"
      "    max_key_prefixes: 5\n"));
  CHECK(config.lock.metrics.key_prefixes == std::vector<std::string>{"order:", "stock:"});
  CHECK(config.lock.metrics.key_prefix_separator == ":");
  CHECK(config.lock.metrics.max_key_prefixes == 5);
  CHECK(dlock::load_config(dir.write("lock:\n  metrics:\n    key_prefixes: \"job:\"\n")).lock.metrics.key_prefixes ==
        std::vector<std::string>{"job:"});

  auto file = dir.write("lock:\n  metrics:\n    key_prefixes: [a, b, c]\n    max_key_prefixes: 2\n");
  CHECK(error_of(file) == at(file, 4) + "lock.metrics.key_prefixes: lists 3 prefixes, more than "
                                        "lock.metrics.max_key_prefixes (2), the bound on series; list fewer or raise "
                                        "the bound");
  file = dir.write("lock:\n  metrics:\n    key_prefixes: [a, other]\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 3) + "lock.metrics.key_prefixes: lists \"other\""));
  file = dir.write("lock:\n  metrics:\n    key_prefixes: [a, a]\n");
  CHECK(error_of(file) == at(file, 3) + "lock.metrics.key_prefixes: lists \"a\" twice; list each prefix once");
  file = dir.write("lock:\n  metrics:\n    key_prefixes: [a, \"\"]\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 3) + "lock.metrics.key_prefixes: item 2 is empty"));
  file = dir.write("lock:\n  metrics:\n    max_key_prefixes: 0\n");
  CHECK(error_of(file) == at(file, 3) + "lock.metrics.max_key_prefixes: 0 is out of range 1..1000");
  file = dir.write("lock:\n  metrics:\n    key_prefix_separator: \"\"\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 3) + "lock.metrics.key_prefix_separator: must not be empty"));
}

TEST_CASE("an empty key prefix is refused") {
  TempDir dir;
  const auto file = dir.write("lock:\n  key_prefix: \"\"\n");
  CHECK_THAT(error_of(file), StartsWith(at(file, 2) + "lock.key_prefix: must not be empty"));
}

TEST_CASE("a setting given twice is refused with both lines") {
  TempDir dir;
  const auto file = dir.write("redis:\n  port: 6379\n  host: h\n  port: 6380\n");
  CHECK(error_of(file) == at(file, 4) + "redis.port: set twice (first at line 2); keep one of them");
}

TEST_CASE("an unknown log level lists the accepted ones") {
  TempDir dir;
  const auto file = dir.write("logging:\n  level: verbose\n");
  CHECK(error_of(file) == at(file, 2) + "logging.level: \"verbose\" is not a log level; use one of "
                                        "trace, debug, info, warn, error, off");
}

TEST_CASE("the shipped config files load") {
  NoOverrides env;
  const auto config = dlock::load_config(dlock::test::source_dir() / "config/dlock.yaml");
  CHECK(config.redis.port == 6379);
  const auto example = dlock::load_config(dlock::test::source_dir() / "config/dlock.example.yaml");
  CHECK(example.lock.key_prefix == "dlock:");
}

TEST_CASE("make_logger returns the dlock logger at the configured level") {
  auto logger = dlock::make_logger({"warn"});
  REQUIRE(logger);
  CHECK(logger->name() == "dlock");
  CHECK(logger->level() == spdlog::level::warn);
  CHECK(spdlog::get("dlock") == logger);

  auto again = dlock::make_logger({"debug"});
  CHECK(again == logger);
  CHECK(logger->level() == spdlog::level::debug);
}

TEST_CASE("make_logger rejects an unknown level") {
  CHECK_THROWS_MATCHES(dlock::make_logger({"loud"}), dlock::ConfigError,
                       Catch::Matchers::Message("logging.level: \"loud\" is not a log level; use one "
                                                "of trace, debug, info, warn, error, off"));
}

TEST_CASE("load_config(path, section) reads dlock's section of a service's own file and ignores the rest") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write(
      "inventory:\n"
      "  warehouses: [north, south]\n"
      "  unknown_to_dlock: {a: 1}\n"
      "dlock:\n"
      "  redis:\n"
      "    port: 6390\n"
      "  lock:\n"
      "    key_prefix: \"inv-lock:\"\n"
      "metrics: on\n");
  const dlock::Config config = dlock::load_config(file, "dlock");
  CHECK(config.redis.port == 6390);
  CHECK(config.lock.key_prefix == "inv-lock:");
  CHECK(config.logging.level == "info");
  // The whole file is still an error for dlock alone: it has sections dlock does not know.
  CHECK_THAT(error_of(file), StartsWith(at(file, 1) + "inventory: unknown section"));
}

TEST_CASE("inside a section, messages name the setting by its full path at its line in the file") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write("app:\n  name: inventory\ndlock:\n  redis:\n    port: 70000\n");
  CHECK_THROWS_MATCHES(dlock::load_config(file, "dlock"), dlock::ConfigError,
                       Catch::Matchers::Message(at(file, 5) + "dlock.redis.port: 70000 is out of range 1..65535"));
  const auto typo = dir.write("dlock:\n  logs:\n    level: info\n", "typo.yaml");
  CHECK_THROWS_WITH(dlock::load_config(typo, "dlock"),
                    StartsWith(at(typo, 2) + "dlock.logs: unknown section (did you mean lock?)"));
}

TEST_CASE("a missing section is named with the sections that are there, at no line") {
  NoOverrides env;
  TempDir dir;
  const auto file = dir.write("app: 1\ndlok:\n  lock:\n    wait_ms: 5\n");
  CHECK_THROWS_MATCHES(
      dlock::load_config(file, "dlock"), dlock::ConfigError,
      Catch::Matchers::Message(whole(file) + "no section dlock at the top level (did you mean dlok?); found app, "
                                              "dlok; add a `dlock:` section with dlock's settings (redis, lock, "
                                              "logging)"));
  const auto empty = dir.write("", "empty.yaml");
  CHECK_THROWS_WITH(dlock::load_config(empty, "dlock"),
                    StartsWith(whole(empty) + "no section dlock at the top level; add"));
  const auto list = dir.write("- dlock\n", "list.yaml");
  CHECK_THROWS_WITH(dlock::load_config(list, "dlock"),
                    StartsWith(at(list, 1) + "looking for the section dlock: expected a map at the top level, "
                                             "got a list"));
}

TEST_CASE("a dotted section path reads a nested section, and an empty section is all defaults") {
  NoOverrides env;
  TempDir dir;
  const auto nested = dir.write("services:\n  other: {}\n  dlock:\n    lock:\n      wait_ms: 250\n");
  CHECK(dlock::load_config(nested, "services.dlock").lock.wait == dlock::Millis(250));
  const auto empty = dir.write("dlock:\nother: 1\n", "empty-section.yaml");
  CHECK(dlock::load_config(empty, "dlock").redis.port == 6379);
  const auto scalar = dir.write("dlock: 5\n", "scalar.yaml");
  CHECK_THROWS_WITH(dlock::load_config(scalar, "dlock"),
                    StartsWith(at(scalar, 1) + "dlock: expected a map of sections (redis, lock, logging)"));
  const auto twice = dir.write("dlock:\n  lock: {}\ndlock:\n  redis: {}\n", "twice.yaml");
  CHECK_THROWS_WITH(dlock::load_config(twice, "dlock"), StartsWith(at(twice, 3) + "dlock: set twice (first at line 1)"));
  for (const char* bad : {".dlock", "dlock.", "a..b"}) {
    INFO(bad);
    CHECK_THROWS_WITH(dlock::load_config(nested, bad), Contains("is not a dotted path"));
  }
}

TEST_CASE("parse_config reads YAML text with the same NAME:LINE: messages") {
  NoOverrides env;
  const dlock::Config config = dlock::parse_config("lock:\n  key_prefix: \"text:\"\n", "inline");
  CHECK(config.lock.key_prefix == "text:");
  CHECK_THROWS_MATCHES(dlock::parse_config("redis:\n  port: 0\n", "inline.yaml"), dlock::ConfigError,
                       Catch::Matchers::Message("inline.yaml:2: redis.port: 0 is out of range 1..65535"));
  CHECK(dlock::parse_config("app: 1\ndlock:\n  lock:\n    wait_ms: 7\n", "service.yaml", "dlock").lock.wait ==
        dlock::Millis(7));
  CHECK_THROWS_WITH(dlock::parse_config("lock: [", "broken"), StartsWith("broken:1: malformed YAML"));
  ScopedEnv port("DLOCK_REDIS_PORT", "6401");  // the environment overrides text as it does a file
  CHECK(dlock::parse_config("redis:\n  port: 7000\n", "inline").redis.port == 6401);
}
