// read_shared_status: the shared status script's reply read part by part into writer,
// readers and permit holders, or into the refusal of that part.
#include "dlock/detail/shared_reading.hpp"

#include <utility>

#include "dlock/detail/reply_integer.hpp"

namespace dlock::detail {

namespace {

std::optional<Millis> lease_of(long long pttl) { return pttl >= 0 ? std::optional<Millis>(pttl) : std::nullopt; }

// A record's holder: {id, count} and the record's PTTL.
LockHolder record_holder(HolderDirectory& holders, const RedisReply& id, const RedisReply& count, long long pttl) {
  LockHolder holder = holders.holder(id.str, integer_of(count).value_or(0));
  holder.lease_left = lease_of(pttl);
  return holder;
}

std::vector<LockHolder> holders_of(const RedisReply& triples, HolderDirectory& holders) {
  std::vector<LockHolder> out;
  for (std::size_t i = 0; i + 2 < triples.elements.size(); i += 3) {
    const long long pttl = triples.elements[i + 2].integer;
    out.push_back(record_holder(holders, triples.elements[i], triples.elements[i + 1], pttl));
  }
  return out;
}

// A counter at `name` that is not a number: the name is another program's.
Refusal not_a_number(const std::string& endpoint, const std::string& name, const char* what) {
  return {"redis " + endpoint + ": " + name + " is not " + what + "; another program uses that name: delete it or "
          "choose another lock.key_prefix", false};
}

// A part Redis refused to read: all that is known of it.
template <typename Reading>
Reading refused(Refusal refusal) {
  Reading reading;
  reading.refusal = std::move(refusal);
  return reading;
}

// The script's read-write part: writer, its PTTL, readers, waiters, fencing counter.
ReadWriteReading read_write_of(const RedisReply& reply, HolderDirectory& holders, const std::string& endpoint,
                               const std::string& rw) {
  ReadWriteReading reading;
  ReadWriteLockStatus& status = reading.status;
  const RedisReply& writer = reply.elements[0];
  const RedisReply& readers = reply.elements[2];
  const RedisReply& fence = reply.elements[7];
  const auto unreadable = [&](const std::string& name, const RedisReply& answer) {
    return refused<ReadWriteReading>(refusal_of(endpoint, "cannot read " + name, answer));
  };
  if (writer.is_error()) return unreadable(rw + ":write", writer);
  if (readers.is_error()) return unreadable(rw + ":readers", readers);
  if (fence.is_error()) return unreadable(rw + ":fence", fence);
  if (writer.elements.size() >= 2) {
    status.writer = record_holder(holders, writer.elements[0], writer.elements[1], reply.elements[1].integer);
  }
  status.readers = holders_of(readers, holders);
  status.waiters = integer_of(reply.elements[5]);
  if (!fence.is_nil()) {
    status.fencing_token = integer_of(fence);
    if (!status.fencing_token) reading.refusal = not_a_number(endpoint, rw + ":fence", "a fencing counter");
  }
  return reading;
}

// The script's semaphore part: count, holders, waiters.
SemaphoreReading semaphore_of(const RedisReply& reply, HolderDirectory& holders, const std::string& endpoint,
                              const std::string& semaphore) {
  SemaphoreReading reading;
  SemaphoreStatus& status = reading.status;
  const RedisReply& count = reply.elements[3];
  const RedisReply& records = reply.elements[4];
  const auto unreadable = [&](const std::string& name, const RedisReply& answer) {
    return refused<SemaphoreReading>(refusal_of(endpoint, "cannot read " + name, answer));
  };
  if (count.is_error()) return unreadable(semaphore, count);
  if (records.is_error()) return unreadable(semaphore + ":holders", records);
  if (!count.is_nil()) {
    status.permits = integer_of(count);
    if (!status.permits) return refused<SemaphoreReading>(not_a_number(endpoint, semaphore, "a permit count"));
  }
  status.holders = holders_of(records, holders);
  for (const LockHolder& holder : status.holders) status.in_use += holder.hold_count;
  status.waiters = integer_of(reply.elements[6]);
  return reading;
}

}  // namespace

SharedReading read_shared_status(LoadedScript& script, HolderDirectory& holders, const std::string& endpoint,
                                 const LockConfig& config, std::string_view key) {
  const std::string base = config.key_prefix + "{" + std::string(key) + "}";
  const std::string rw = base + ":rw";
  const std::string semaphore = base + ":semaphore";
  const RedisReply reply = script.run({rw + ":write", rw + ":readers", semaphore, semaphore + ":holders",
                                       rw + ":queue", semaphore + ":queue", rw + ":fence"});
  if (reply.is_error() || reply.elements.size() != 8) {
    const Refusal refusal =
        refusal_of(endpoint, "cannot read the read-write lock and semaphore of " + std::string(key), reply);
    return {refused<ReadWriteReading>(refusal), refused<SemaphoreReading>(refusal)};
  }
  return {read_write_of(reply, holders, endpoint, rw), semaphore_of(reply, holders, endpoint, semaphore)};
}

}  // namespace dlock::detail
