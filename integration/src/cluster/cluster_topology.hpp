#pragma once
// What a cluster executor knows of its cluster: every node it has met (each
// with its own connection pool and a reserved connection for the watchdog),
// which master serves each of the 16384 slots, and where its subscriber may
// connect. Reading the map costs no round trip: a slot's master is one atomic
// load. The map is read again (CLUSTER SLOTS) only when a node redirects a
// command (MOVED), stops answering, or says the cluster is down.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/cluster_replies.hpp"
#include "dlock/config.hpp"
#include "dlock/connection_pool.hpp"
#include "dlock/reserved_connection.hpp"
#include "cluster/hash_slot.hpp"

namespace dlock::detail {

class ClusterTopology {
 public:
  using Clock = std::chrono::steady_clock;

  struct Node {
    Node(const RedisConfig& config, NodeAddress node_address);
    const NodeAddress address;
    const std::string name;  // "host:port"
    ConnectionPool pool;
    ReservedConnection urgent;  // the watchdog's, outside the pool
  };

  // `config`: every node's settings (AUTH, timeouts, pool size, TLS); its
  // cluster.nodes are the seeds (redis.host:redis.port when there are none).
  explicit ClusterTopology(RedisConfig config);
  ~ClusterTopology();
  ClusterTopology(const ClusterTopology&) = delete;
  ClusterTopology& operator=(const ClusterTopology&) = delete;

  // Learns the slot map from the first seed that answers. Throws
  // ConnectionError naming every seed and why it failed, at once for a
  // refused password (every node shares it), or when no slot is served.
  void discover();

  // The master serving `slot`, or null when none is known. Lock-free.
  Node* master_of(std::uint16_t slot) const { return slots_[slot].load(std::memory_order_acquire); }
  // A master for keyless commands (they are spread over the masters), or null.
  Node* any_master();
  std::vector<Node*> masters() const;
  // The node at `address`, met now if it is new (nothing is dialled yet).
  Node& node_at(const NodeAddress& address);

  // Changes whenever the map was read again.
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // A MOVED: `slot` is served by `to` from now on.
  void moved(std::uint16_t slot, Node& to) { slots_[slot].store(&to, std::memory_order_release); }
  // Reads the map again from the first node that answers (known nodes, `avoid`
  // last, then the seeds), unless it was read since version `seen`. Gives up
  // at `deadline`; never throws. Returns whether the map is fresh.
  bool refresh(std::uint64_t seen, Clock::time_point deadline, const Node* avoid = nullptr);

  // Where the subscriber connects: each node in turn, masters first, so a
  // subscriber whose node died moves on to the next. Its epoch changes when
  // the node it was given leaves the map.
  std::shared_ptr<EndpointSource> subscriber_source() const;

  // "cluster host:port,host:port" (the seeds), for messages.
  const std::string& description() const { return description_; }

 private:
  class Rotation;

  // The ranges `address` answers CLUSTER SLOTS with; throws ConnectionError.
  std::vector<SlotRange> ask_slots(const NodeAddress& address, Millis limit) const;
  void install(const std::vector<SlotRange>& ranges);

  const RedisConfig config_;
  std::vector<NodeAddress> seeds_;
  std::string description_;
  std::mutex refresh_mutex_;  // one reading of the map at a time; held across its I/O
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // guarded by mutex_; never erased, so Node* stay valid
  std::vector<Node*> masters_;                           // guarded by mutex_
  std::vector<NodeAddress> members_;                     // guarded by mutex_: masters, then replicas
  std::atomic<std::size_t> next_master_{0};              // atomic: spreads keyless commands
  std::atomic<std::uint64_t> version_{0};
  std::unique_ptr<std::array<std::atomic<Node*>, kSlotCount>> slots_holder_;
  std::array<std::atomic<Node*>, kSlotCount>& slots_;  // each entry atomic
  std::shared_ptr<Rotation> subscriber_source_;
};

}  // namespace dlock::detail
