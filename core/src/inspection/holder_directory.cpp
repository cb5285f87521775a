// HolderDirectory: a holder's host and pid from its service's registry entry, read once per
// service, and since when it holds from its acquisition id.
#include "dlock/detail/holder_directory.hpp"

#include "dlock/detail/acquisition_id.hpp"
#include "dlock/detail/instance_registry.hpp"
#include "dlock/detail/node_reads.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

std::optional<HolderService> HolderDirectory::service(const std::string& instance_id) {
  if (auto known = entries_.find(instance_id); known != entries_.end()) return known->second;
  std::optional<HolderService> entry;
  try {
    // On a Redlock, any node's entry: only the service writes it, always the same text, so a node
    // without it (restarted since, or missed a write) knows less, never otherwise.
    const RedisCommand get{"GET", instance_key(key_prefix_, instance_id)};
    for (const NodeReplies& node : pipeline_on_each_node(redis_, {get})) {
      if (entry || !node || node->front().type != RedisReply::Type::String) continue;
      if (const auto decoded = decode_instance(node->front().str)) {
        entry = HolderService{decoded->host, decoded->pid, decoded->started_unix_ms};
      }
    }
  } catch (const ConnectionError&) {
    // The lock itself was read; who holds it stays unknown.
  }
  return entries_[instance_id] = entry;
}

LockHolder HolderDirectory::holder(const std::string& owner, long long hold_count) {
  LockHolder holder;
  holder.owner = owner;
  holder.hold_count = hold_count;
  const auto id = parse_acquisition_id(owner);
  if (!id) return holder;
  holder.service = service(std::string(id->instance));
  if (holder.service) {
    holder.since_unix_ms = holder.service->started_unix_ms + static_cast<long long>(id->micros_since_start / 1000);
  }
  return holder;
}

}  // namespace dlock::detail
