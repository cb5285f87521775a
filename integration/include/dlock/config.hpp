#pragma once
// The whole configuration of a dlock service, as read from YAML by load_config.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dlock/lock_options.hpp"

namespace dlock {

// How the servers named in `redis:` are deployed.
enum class RedisMode { standalone, sentinel, cluster, redlock };

// "standalone", "sentinel", "cluster" or "redlock".
const char* mode_name(RedisMode mode);

// One server's address, as a list setting ("127.0.0.1:26379") gives it.
struct NodeAddress {
  std::string host;
  int port = 0;
  bool operator==(const NodeAddress&) const = default;
};

// "host:port" ("[::1]:6379" for an IPv6 address).
std::string to_string(const NodeAddress& address);

// Config section `redis.tls:`. Applies to every connection dlock makes,
// Sentinels included.
struct TlsConfig {
  bool enabled = false;     // also turned on by a rediss:// url
  std::string ca_file;      // PEM bundle that verifies servers; empty = the system's store
  std::string cert_file;    // client certificate (PEM), for servers that demand mutual TLS
  std::string key_file;     // its private key (PEM); required with cert_file
  std::string server_name;  // SNI and the name verified; empty = the host dialled
  bool verify = true;       // false: no certificate check at all (logged as a warning)
};

// Config section `redis.sentinel:` (redis.mode: sentinel).
struct SentinelConfig {
  std::string master_name = "mymaster";
  std::vector<NodeAddress> nodes;  // the Sentinels asked, in order
  std::string username;            // the Sentinels' own AUTH, if any
  std::string password;
};

// Config section `redis.cluster:` (redis.mode: cluster).
struct ClusterConfig {
  std::vector<NodeAddress> nodes;  // seeds; the rest of the cluster is discovered
};

// Config section `redis.redlock:` (redis.mode: redlock): one lock over N
// independent standalone masters, had when a majority granted it.
struct RedlockConfig {
  std::vector<NodeAddress> nodes;  // an odd number, 3 or more, all distinct
  // A node that restarted (its uptime is below this) may have lost locks it
  // held: its grants do not count toward a majority until its uptime reaches
  // this. Must be at least the longest lease any service uses on these nodes
  // (lock.watchdog_timeout_ms, and fixed leases are refused above it); 0 for
  // nodes that persist every write (appendonly yes, appendfsync always).
  Millis restarted_node_delay{30000};
};

// Where a connection goes when it is not redis.host:redis.port: set by the
// Sentinel and Cluster executors (the current master, a node that answers),
// never read from YAML.
class EndpointSource {
 public:
  virtual ~EndpointSource() = default;
  // The address the next connection dials.
  virtual NodeAddress next() = 0;
  // Changes whenever connections made before must be dropped (the master
  // moved): a connection made at another epoch counts as broken.
  virtual std::uint64_t epoch() const = 0;
};

// Config section `redis:`.
struct RedisConfig {
  RedisMode mode = RedisMode::standalone;
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // Redis 6 ACL user; empty = the default user
  std::string password;  // empty = no AUTH
  int database = 0;
  Millis connect_timeout{1000};
  Millis command_timeout{1000};
  std::size_t pool_size = 8;
  TlsConfig tls;
  SentinelConfig sentinel;
  ClusterConfig cluster;
  RedlockConfig redlock;
  // Not from YAML; see EndpointSource. Null: host and port.
  std::shared_ptr<EndpointSource> endpoint_source;
};

// Config section `logging:`.
struct LoggingConfig {
  std::string level = "info";  // trace|debug|info|warn|error|off
};

struct Config {
  RedisConfig redis;
  LockConfig lock;
  LoggingConfig logging;
};

// Reads a YAML file as documented in config/dlock.example.yaml: ${VAR} and
// ${VAR:-default} are expanded in values, then DLOCK_REDIS_HOST,
// DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD override the file. Every setting
// is optional. Throws ConfigError ("FILE:LINE: setting: what is wrong; what to
// do") for malformed YAML, an unknown key, a wrong type, an out-of-range
// value or an unset ${VAR}; "FILE: what is wrong" for what has no line: a
// missing, unreadable or oversized file, a bad DLOCK_REDIS_* variable.
Config load_config(const std::filesystem::path& yaml);

// The same, for a file that also holds the service's own settings: reads
// only `section` (a top-level key such as "dlock", or a dotted path such as
// "services.dlock"), whose value holds dlock's redis, lock and logging
// sections, and ignores the rest of the file. Messages name settings by
// their full path ("dlock.redis.port"). A missing section is a ConfigError
// (an empty `dlock:` means all defaults).
Config load_config(const std::filesystem::path& yaml, const std::string& section);

// As load_config, from YAML text already in memory; `source_name` stands for
// the file name in messages ("NAME:LINE: ..."). An empty section reads the
// whole text.
Config parse_config(const std::string& yaml_text, const std::string& source_name, const std::string& section = "");

// Applies DLOCK_REDIS_HOST, DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD to
// `config`, each when set and not empty (load_config calls it after reading
// the file; call it yourself for a Config built without one). The port must
// be plain digits 1..65535, no sign. Throws ConfigError naming the variable.
void apply_environment_overrides(Config& config);

}  // namespace dlock
