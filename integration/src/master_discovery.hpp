#pragma once
// Finds the current master of a Sentinel-monitored set: asks the Sentinels in
// order (SENTINEL GET-MASTER-ADDR-BY-NAME, after AUTH with the Sentinels' own
// credentials) and confirms each answer with ROLE on the address given, since
// a Sentinel that has not yet heard of a failover names a demoted master.

#include <string>

#include "dlock/config.hpp"

namespace dlock::detail {

// Returns the first confirmed master. Throws ConnectionError naming every
// Sentinel asked, what each answered, and the setting to check (no Sentinel
// reachable, the master name unknown, AUTH refused, only replicas named).
NodeAddress discover_master(const RedisConfig& config);

// The config of a connection to one Sentinel: `config`'s timeouts and TLS,
// none of the master's credentials or database (a Sentinel has neither).
// With `authenticated`, AUTH is left to RedisConnection, with the Sentinels'
// own credentials.
RedisConfig sentinel_connection_config(const RedisConfig& config, bool authenticated);

// A reply of a master refusing a write because it is a replica now.
bool is_readonly_refusal(const std::string& error);

}  // namespace dlock::detail
