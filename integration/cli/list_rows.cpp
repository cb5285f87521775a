// `dlock list`'s rows read: the locks in batches (on every node of a Redlock at once, made one
// by the majority rule of `dlock status`), the read-write locks and semaphores key by key.
#include "list_rows.hpp"

#include <algorithm>

#include "dlock/detail/node_reads.hpp"
#include "dlock/detail/quorum_status.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/detail/reply_integer.hpp"
#include "dlock/detail/shared_reading.hpp"

namespace dlock::cli {

namespace {

// Locks read per round trip.
constexpr std::size_t kBatch = 100;

// Each node's reply to the read of one lock, in the status script's shape {HGETALL, PTTL, GET fence}
// (HGETALL's refusal as it is), from the batch's replies at `first` (HGETALL, PTTL, ZCARD, GET).
std::vector<std::optional<RedisReply>> status_replies(const std::vector<detail::NodeReplies>& nodes,
                                                      std::size_t first) {
  std::vector<std::optional<RedisReply>> replies;
  for (const detail::NodeReplies& node : nodes) {
    if (!node) {
      replies.emplace_back();
      continue;
    }
    const RedisReply* read = &(*node)[first];
    replies.push_back(read[0].is_error() ? read[0]
                                         : RedisReply{RedisReply::Type::Array, 0, {}, {read[0], read[1], read[3]}});
  }
  return replies;
}

// The most waiters any node has in line (a waiter stands in line on every node it reached).
std::optional<long long> waiters_of(const std::vector<detail::NodeReplies>& nodes, std::size_t first) {
  std::optional<long long> most;
  for (const detail::NodeReplies& node : nodes) {
    if (!node) continue;
    if (const auto waiting = detail::integer_of((*node)[first + 2])) most = std::max(most.value_or(*waiting), *waiting);
  }
  return most;
}

ListRow shared_row(const std::string& key, const char* kind, const std::string& name, const LockHolder& record,
                   std::optional<long long> waiters) {
  const auto lease_ms = record.lease_left ? std::optional<long long>(record.lease_left->count()) : std::nullopt;
  return ListRow{key, kind, name, record, lease_ms, waiters, std::nullopt, std::nullopt, {}};
}

}  // namespace

std::vector<ListRow> lock_rows(RedisExecutor& redis, detail::HolderDirectory& holders, const std::string& prefix,
                               const std::set<std::string>& names) {
  const std::vector<std::string> ordered(names.begin(), names.end());
  const bool quorum = !redis.quorum_nodes().empty();
  std::vector<ListRow> rows;
  for (std::size_t first = 0; first < ordered.size(); first += kBatch) {
    const std::size_t last = std::min(ordered.size(), first + kBatch);
    std::vector<RedisCommand> commands;
    for (std::size_t i = first; i < last; ++i) {
      const std::string& name = ordered[i];
      commands.insert(commands.end(), {{"HGETALL", name}, {"PTTL", name}, {"ZCARD", name + ":queue"},
                                       {"GET", name + ":fence"}});
    }
    const std::vector<detail::NodeReplies> nodes = detail::pipeline_on_each_node(redis, commands);
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t at = 4 * (i - first);
      ListRow row;
      row.lock_name = ordered[i];
      row.key = ordered[i].substr(prefix.size() + 1, ordered[i].size() - prefix.size() - 2);
      row.kind = "lock";
      row.waiters = waiters_of(nodes, at);
      const std::optional<RedisReply> agreed = detail::decided_status(status_replies(nodes, at), quorum);
      if (!agreed) {
        row.error = detail::no_majority_agrees(redis.endpoint(), nodes.size(), row.lock_name);
        rows.push_back(std::move(row));
        continue;
      }
      if (agreed->is_error()) {
        detail::throw_refusal(detail::refusal_of(redis.endpoint(), "cannot read " + row.lock_name, *agreed));
      }
      const RedisReply& hash = agreed->elements[0];
      if (hash.elements.size() < 2) continue;  // released since the scan, or held by a minority of the nodes
      row.holder = holders.holder(hash.elements[0].str, detail::integer_of(hash.elements[1]).value_or(0));
      if (const auto pttl = detail::integer_of(agreed->elements[1]); pttl && *pttl >= 0) row.lease_ms = pttl;
      row.fencing_token = detail::integer_of(agreed->elements[2]);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<ListRow> shared_rows(detail::LoadedScript& script, detail::HolderDirectory& holders,
                                 const std::string& endpoint, const LockConfig& config,
                                 const std::set<std::string>& keys) {
  std::vector<ListRow> rows;
  for (const std::string& key : keys) {
    const detail::SharedReading status = detail::read_shared_status(script, holders, endpoint, config, key);
    for (const detail::Refusal* refusal : {&status.read_write.refusal, &status.semaphore.refusal}) {
      if (*refusal) detail::throw_refusal(*refusal);
    }
    const ReadWriteLockStatus& rw = status.read_write.status;
    const std::string rw_name = config.key_prefix + "{" + key + "}:rw";
    if (rw.writer) {
      rows.push_back(shared_row(key, "write", rw_name, *rw.writer, rw.waiters));
      rows.back().fencing_token = rw.fencing_token;
    }
    for (const LockHolder& reader : rw.readers) rows.push_back(shared_row(key, "read", rw_name, reader, rw.waiters));
    const SemaphoreStatus& semaphore = status.semaphore.status;
    for (const LockHolder& holder : semaphore.holders) {
      rows.push_back(shared_row(key, "semaphore", config.key_prefix + "{" + key + "}:semaphore", holder,
                                semaphore.waiters));
      rows.back().permits = semaphore.permits;
    }
  }
  return rows;
}

}  // namespace dlock::cli
