#pragma once
// Finds the current master of a Sentinel-monitored set. Every Sentinel is
// asked at once (after AUTH with the Sentinels' own credentials) where the
// master is and under which config-epoch: each failover raises the epoch, and
// a Sentinel that has not yet heard of one (restarted from its config file,
// or not yet reached by the others) names the old master under the old epoch
// while that server may still answer ROLE as a master for seconds. So the
// address under the highest config-epoch wins, never the first one named,
// and it is confirmed with ROLE.

#include <cstdint>
#include <string>

#include "dlock/config.hpp"

namespace dlock::detail {

// The master the Sentinels name, and the config-epoch they name it under.
struct FoundMaster {
  NodeAddress address;
  std::uint64_t config_epoch = 0;
};

// Asks every Sentinel in parallel (an unreachable one costs one connect
// timeout, not one each) and returns the address named under the highest
// config-epoch (among several under it, the one most Sentinels name) that
// answers ROLE as a master. An address named only under a lower epoch is
// never returned while a higher one is named, even if it answers ROLE as a
// master. Throws ConnectionError naming every Sentinel asked, what each
// answered, and the setting to check (no Sentinel reachable, the master name
// unknown, AUTH or a command refused, no master where the newest epoch says).
FoundMaster discover_master(const RedisConfig& config);

// Empty when `address` answers ROLE as a master; else why it is not the one
// (what it is now, or why it could not be asked).
std::string why_not_master(const RedisConfig& config, const NodeAddress& address);

// The config of a connection to one Sentinel: `config`'s timeouts and TLS,
// none of the master's credentials or database (a Sentinel has neither).
// With `authenticated`, AUTH is left to RedisConnection, with the Sentinels'
// own credentials.
RedisConfig sentinel_connection_config(const RedisConfig& config, bool authenticated);

// A reply of a master refusing a write because it is a replica now.
bool is_readonly_refusal(const std::string& error);

}  // namespace dlock::detail
