#pragma once
// The config of one server of a deployment of several (a cluster's node, a
// Redlock's node): the whole redis section, aimed at that server alone.

#include "dlock/config.hpp"

namespace dlock::detail {

inline RedisConfig node_config(const RedisConfig& config, const NodeAddress& address) {
  RedisConfig node = config;
  node.mode = RedisMode::standalone;
  node.host = address.host;
  node.port = address.port;
  node.redlock = {};
  node.endpoint_source = nullptr;
  return node;
}

}  // namespace dlock::detail
