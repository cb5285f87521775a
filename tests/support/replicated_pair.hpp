#pragma once
// A master and one replica of it that has finished its first sync, for the
// lock.replica_acks tests. The replica's link goes through a proxy, so a
// test can delay it or cut it silently.
#include <catch2/catch.hpp>

#include <string>

#include "services.hpp"
#include "tcp_proxy.hpp"

namespace dlock::test {

// The value of `field` in the server's INFO replication, or empty.
inline std::string replication_field(const RedisServer& server, const std::string& field) {
  const std::string info = server.run({"INFO", "replication"});
  const auto at = info.find(field + ":");
  if (at == std::string::npos) return "";
  const auto start = at + field.size() + 1;
  return info.substr(start, info.find_first_of("\r\n", start) - start);
}

struct ReplicatedPair {
  RedisServer master;
  TcpProxy link{master.port()};
  RedisServer replica{{"--replicaof", "127.0.0.1", std::to_string(link.port())}};
  ReplicatedPair() {
    REQUIRE(eventually([&] { return replication_field(replica, "master_link_status") == "up"; }));
    REQUIRE(eventually([&] { return replication_field(master, "connected_slaves") == "1"; }));
  }
};

}  // namespace dlock::test
