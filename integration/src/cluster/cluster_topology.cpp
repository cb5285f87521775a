// The slot map: read with CLUSTER SLOTS (from a seed, later from any node it knows), installed
// as one atomic pointer per slot, and the rotation of nodes the subscriber connects through.
#include "cluster/cluster_topology.hpp"

#include <algorithm>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"
#include "config/node_config.hpp"
#include "connection/connection_failure.hpp"

namespace dlock::detail {
namespace {

bool contains(const std::vector<NodeAddress>& list, const NodeAddress& address) {
  return std::find(list.begin(), list.end(), address) != list.end();
}

}  // namespace

// Hands out the cluster's nodes in turn; self-contained, since the
// subscriber's connections may hold it a little longer than the topology.
class ClusterTopology::Rotation final : public EndpointSource {
 public:
  explicit Rotation(std::vector<NodeAddress> seeds) : members_(std::move(seeds)) {}

  NodeAddress next() override {
    std::lock_guard guard(mutex_);
    given_ = members_[cursor_++ % members_.size()];
    return given_;
  }
  std::uint64_t epoch() const override { return epoch_.load(std::memory_order_acquire); }

  // The nodes after a reading of the map: a subscriber on a node no longer in it moves.
  void update(std::vector<NodeAddress> members) {
    if (members.empty()) return;
    std::lock_guard guard(mutex_);
    members_ = std::move(members);
    if (!given_.host.empty() && !contains(members_, given_)) epoch_.fetch_add(1, std::memory_order_acq_rel);
  }

 private:
  std::mutex mutex_;
  std::vector<NodeAddress> members_;  // guarded by mutex_; never empty
  std::size_t cursor_ = 0;            // guarded by mutex_
  NodeAddress given_;                 // guarded by mutex_: the address last handed out
  std::atomic<std::uint64_t> epoch_{0};
};

ClusterTopology::Node::Node(const RedisConfig& config, NodeAddress node_address)
    : address(std::move(node_address)),
      name(to_string(address)),
      pool(node_config(config, address)),
      urgent(node_config(config, address)) {}

ClusterTopology::ClusterTopology(RedisConfig config)
    : config_(std::move(config)),
      seeds_(config_.cluster.nodes),
      slots_holder_(std::make_unique<std::array<std::atomic<Node*>, kSlotCount>>()),
      slots_(*slots_holder_) {
  if (seeds_.empty()) seeds_.push_back(NodeAddress{config_.host, config_.port});
  description_ = "cluster ";
  for (std::size_t i = 0; i < seeds_.size(); ++i) description_ += (i ? "," : "") + to_string(seeds_[i]);
  for (auto& slot : slots_) slot.store(nullptr, std::memory_order_relaxed);
  subscriber_source_ = std::make_shared<Rotation>(seeds_);
  // Not held across fork(): the map is read (and nodes, whose pools register
  // with the fork guard, are made) while these are held, so holding them in
  // the fork handler inverts that order (a deadlock TSan found). A child
  // never uses the map: every call of a service refuses after fork().
}

ClusterTopology::~ClusterTopology() = default;

std::shared_ptr<EndpointSource> ClusterTopology::subscriber_source() const { return subscriber_source_; }

ClusterTopology::Node* ClusterTopology::any_master() {
  std::lock_guard guard(mutex_);
  if (masters_.empty()) return nullptr;
  return masters_[next_master_.fetch_add(1, std::memory_order_relaxed) % masters_.size()];
}

std::vector<ClusterTopology::Node*> ClusterTopology::masters() const {
  std::lock_guard guard(mutex_);
  return masters_;
}

ClusterTopology::Node& ClusterTopology::node_at(const NodeAddress& address) {
  std::lock_guard guard(mutex_);
  auto& node = nodes_[to_string(address)];
  if (!node) node = std::make_unique<Node>(config_, address);
  return *node;
}

std::vector<SlotRange> ClusterTopology::ask_slots(const NodeAddress& address, Millis limit) const {
  RedisConfig bounded = node_config(config_, address);
  bounded.connect_timeout = std::max(Millis(1), std::min(config_.connect_timeout, limit));
  bounded.command_timeout = std::max(Millis(1), std::min(config_.command_timeout, limit));
  RedisConnection connection(bounded);
  const RedisReply reply = connection.command({"CLUSTER", "SLOTS"});
  if (reply.is_error()) {
    if (is_auth_refusal(reply.str)) throw AuthenticationError(describe_auth_refusal(to_string(address), reply.str));
    throw ConnectionError("redis " + to_string(address) + ": CLUSTER SLOTS refused (" + reply.str +
                          "); redis.mode cluster needs a node started with cluster-enabled yes, and a user "
                          "allowed +cluster|slots");
  }
  std::optional<std::vector<SlotRange>> ranges = parse_cluster_slots(reply, address.host);
  if (!ranges) throw ConnectionError("redis " + to_string(address) + ": CLUSTER SLOTS answered something unexpected");
  if (ranges->empty()) {
    throw ConnectionError("redis " + to_string(address) + ": the cluster serves no slot yet; create it first "
                          "(redis-cli --cluster create ...) or wait until its slots are assigned");
  }
  return std::move(*ranges);
}

void ClusterTopology::discover() {
  std::lock_guard serial(refresh_mutex_);
  std::string causes;
  for (const NodeAddress& seed : seeds_) {
    try {
      install(ask_slots(seed, config_.connect_timeout + config_.command_timeout));
      return;
    } catch (const AuthenticationError&) {
      throw;  // every node shares the password: a refusal will not get better at the next seed
    } catch (const ConnectionError& e) {
      causes += std::string(causes.empty() ? "" : "; ") + e.what();
    }
  }
  throw ConnectionError("redis " + description_ + ": no seed in redis.cluster.nodes told the slot map (" + causes +
                        "); check redis.cluster.nodes and that the cluster is up");
}

bool ClusterTopology::refresh(std::uint64_t seen, Clock::time_point deadline, const Node* avoid) {
  std::lock_guard serial(refresh_mutex_);
  if (version() != seen) return true;  // read by another caller meanwhile
  std::vector<NodeAddress> candidates;
  {
    std::lock_guard guard(mutex_);
    for (const NodeAddress& member : members_) {
      if (!avoid || !(member == avoid->address)) candidates.push_back(member);
    }
  }
  for (const NodeAddress& seed : seeds_) {
    if (!contains(candidates, seed) && (!avoid || !(seed == avoid->address))) candidates.push_back(seed);
  }
  if (avoid) candidates.push_back(avoid->address);
  for (const NodeAddress& candidate : candidates) {
    const auto left = std::chrono::ceil<Millis>(deadline - Clock::now());
    if (left <= Millis(0)) return false;
    try {
      install(ask_slots(candidate, left));
      return true;
    } catch (const ConnectionError&) {
      // The next node may answer.
    }
  }
  return false;
}

void ClusterTopology::install(const std::vector<SlotRange>& ranges) {
  std::vector<Node*> masters;
  std::vector<NodeAddress> members;
  std::vector<std::pair<const SlotRange*, Node*>> served;
  for (const SlotRange& range : ranges) {
    Node* master = &node_at(range.master);
    served.emplace_back(&range, master);
    if (std::find(masters.begin(), masters.end(), master) == masters.end()) masters.push_back(master);
  }
  for (Node* master : masters) members.push_back(master->address);
  for (const SlotRange& range : ranges) {
    for (const NodeAddress& replica : range.replicas) {
      if (!contains(members, replica)) members.push_back(replica);
    }
  }
  // Slots no range names have no master now (the cluster lost them).
  std::vector<Node*> map(kSlotCount, nullptr);
  for (const auto& [range, master] : served) std::fill(map.begin() + range->first, map.begin() + range->last + 1, master);
  for (std::size_t slot = 0; slot < kSlotCount; ++slot) slots_[slot].store(map[slot], std::memory_order_release);
  {
    std::lock_guard guard(mutex_);
    masters_ = std::move(masters);
    members_ = members;
  }
  subscriber_source_->update(std::move(members));
  version_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace dlock::detail
