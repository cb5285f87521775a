// `dlock status`'s lines for the read-write lock and the semaphore of the same name: the
// script's reply read part by part into writer, readers and permit holders, or into the
// refusal of that part, then printed as text or JSON.
#include "shared_status.hpp"

#include <sstream>
#include <utility>

#include "json.hpp"
#include "reply_integer.hpp"

namespace dlock::cli {

namespace {

std::optional<long long> lease_of(long long pttl) { return pttl >= 0 ? std::optional<long long>(pttl) : std::nullopt; }

std::vector<RecordHolder> holders_of(const RedisReply& triples, HolderDirectory& holders) {
  std::vector<RecordHolder> out;
  for (std::size_t i = 0; i + 2 < triples.elements.size(); i += 3) {
    out.push_back({holders.holder(triples.elements[i].str, integer_of(triples.elements[i + 1]).value_or(0)),
                   lease_of(triples.elements[i + 2].integer)});
  }
  return out;
}

std::string lease_text(const std::optional<long long>& lease_ms) {
  return lease_ms ? std::to_string(*lease_ms) + "ms left" : std::string("without expiry");
}

std::string record_json(const RecordHolder& r, const char* count_name) {
  return "{\"token\":" + json_string(r.holder.owner) + ",\"" + count_name + "\":" +
         std::to_string(r.holder.hold_count) + holder_json_fields(r.holder) +
         ",\"lease_ms\":" + (r.lease_ms ? std::to_string(*r.lease_ms) : std::string("null")) + "}";
}

std::string records_json(const std::vector<RecordHolder>& records, const char* count_name) {
  std::string out = "[";
  for (std::size_t i = 0; i < records.size(); ++i) out += (i ? "," : "") + record_json(records[i], count_name);
  return out + "]";
}

// A counter at `name` that is not a number: the name is another program's.
Refusal not_a_number(const std::string& endpoint, const std::string& name, const char* what) {
  return {"redis " + endpoint + ": " + name + " is not " + what + "; another program uses that name: delete it or "
          "choose another lock.key_prefix", false};
}

// A part (ReadWriteStatus, SemaphoreStatus) Redis refused to read: all that is known of it.
template <typename Part>
Part refused(Refusal refusal) {
  Part part;
  part.refusal = std::move(refusal);
  return part;
}

// The script's read-write part: writer, its PTTL, readers, waiters, fencing counter.
ReadWriteStatus read_write_of(const RedisReply& reply, HolderDirectory& holders, const std::string& endpoint,
                              const std::string& rw) {
  ReadWriteStatus status;
  const RedisReply& writer = reply.elements[0];
  const RedisReply& readers = reply.elements[2];
  const RedisReply& fence = reply.elements[7];
  const auto unreadable = [&](const std::string& name, const RedisReply& answer) {
    return refused<ReadWriteStatus>(refusal_of(endpoint, "cannot read " + name, answer));
  };
  if (writer.is_error()) return unreadable(rw + ":write", writer);
  if (readers.is_error()) return unreadable(rw + ":readers", readers);
  if (fence.is_error()) return unreadable(rw + ":fence", fence);
  if (writer.elements.size() >= 2) {
    status.writer = RecordHolder{holders.holder(writer.elements[0].str, integer_of(writer.elements[1]).value_or(0)),
                                 lease_of(reply.elements[1].integer)};
  }
  status.readers = holders_of(readers, holders);
  status.waiters = integer_of(reply.elements[5]);
  if (!fence.is_nil()) {
    status.fencing_token = integer_of(fence);
    if (!status.fencing_token) status.refusal = not_a_number(endpoint, rw + ":fence", "a fencing counter");
  }
  return status;
}

// The script's semaphore part: count, holders, waiters.
SemaphoreStatus semaphore_of(const RedisReply& reply, HolderDirectory& holders, const std::string& endpoint,
                             const std::string& semaphore) {
  SemaphoreStatus status;
  const RedisReply& count = reply.elements[3];
  const RedisReply& records = reply.elements[4];
  const auto unreadable = [&](const std::string& name, const RedisReply& answer) {
    return refused<SemaphoreStatus>(refusal_of(endpoint, "cannot read " + name, answer));
  };
  if (count.is_error()) return unreadable(semaphore, count);
  if (records.is_error()) return unreadable(semaphore + ":holders", records);
  if (!count.is_nil()) {
    status.permits = integer_of(count);
    if (!status.permits) return refused<SemaphoreStatus>(not_a_number(endpoint, semaphore, "a permit count"));
  }
  status.holders = holders_of(records, holders);
  for (const RecordHolder& r : status.holders) status.in_use += r.holder.hold_count;
  status.waiters = integer_of(reply.elements[6]);
  return status;
}

}  // namespace

SharedStatus read_shared_status(CliScript& script, HolderDirectory& holders, const std::string& endpoint,
                                const LockConfig& config, const std::string& key) {
  const std::string rw = config.key_prefix + "{" + key + "}:rw";
  const std::string semaphore = config.key_prefix + "{" + key + "}:semaphore";
  const RedisReply reply = script.run({rw + ":write", rw + ":readers", semaphore, semaphore + ":holders",
                                       rw + ":queue", semaphore + ":queue", rw + ":fence"});
  if (reply.is_error() || reply.elements.size() != 8) {
    const Refusal refusal = refusal_of(endpoint, "cannot read the read-write lock and semaphore of " + key, reply);
    return {refused<ReadWriteStatus>(refusal), refused<SemaphoreStatus>(refusal)};
  }
  return {read_write_of(reply, holders, endpoint, rw), semaphore_of(reply, holders, endpoint, semaphore)};
}

std::string shared_status_text(const std::string& key, const SharedStatus& status, long long now_ms) {
  std::ostringstream out;
  const ReadWriteStatus& rw = status.read_write;
  if (rw.refusal) {
    out << key << " (read-write): unknown; " << rw.refusal.error << "\n";
  } else if (rw.held()) {
    out << key << " (read-write): ";
    if (rw.writer) {
      out << "write-locked by " << holder_text(rw.writer->holder, now_ms) << ", owner " << rw.writer->holder.owner
          << " (hold count " << rw.writer->holder.hold_count << "), lease " << lease_text(rw.writer->lease_ms);
      if (!rw.readers.empty()) out << "; ";
    }
    if (!rw.readers.empty()) out << "read-locked by " << rw.readers.size() << " reader(s)";
    for (std::size_t i = 0; i < rw.readers.size(); ++i) {
      const RecordHolder& r = rw.readers[i];
      out << (i ? "; " : ": ") << holder_text(r.holder, now_ms) << ", owner " << r.holder.owner << " (hold count "
          << r.holder.hold_count << "), lease " << lease_text(r.lease_ms);
    }
    out << "\n";
  }
  const SemaphoreStatus& semaphore = status.semaphore;
  if (semaphore.refusal) {
    out << key << " (semaphore): unknown; " << semaphore.refusal.error << "\n";
  } else if (semaphore.exists()) {
    out << key << " (semaphore): " << semaphore.in_use << " of "
        << (semaphore.permits ? std::to_string(*semaphore.permits) : std::string("(no count)")) << " permits held";
    for (std::size_t i = 0; i < semaphore.holders.size(); ++i) {
      const RecordHolder& r = semaphore.holders[i];
      out << (i ? "; " : ": ") << r.holder.hold_count << " by " << holder_text(r.holder, now_ms) << ", owner "
          << r.holder.owner << ", lease " << lease_text(r.lease_ms);
    }
    out << "\n";
  }
  return out.str();
}

std::string shared_status_json(const SharedStatus& status) {
  const ReadWriteStatus& rw = status.read_write;
  const SemaphoreStatus& semaphore = status.semaphore;
  std::string out = ",\"read_write\":";
  if (rw.refusal) {
    out += "{\"error\":" + json_string(rw.refusal.error) + "}";
  } else if (rw.held()) {
    out += "{\"writer\":" + (rw.writer ? record_json(*rw.writer, "hold_count") : std::string("null")) +
           ",\"readers\":" + records_json(rw.readers, "hold_count") + "}";
  } else {
    out += "null";
  }
  out += ",\"semaphore\":";
  if (semaphore.refusal) {
    out += "{\"error\":" + json_string(semaphore.refusal.error) + "}";
  } else if (semaphore.exists()) {
    out += "{\"permits\":" + (semaphore.permits ? std::to_string(*semaphore.permits) : std::string("null")) +
           ",\"in_use\":" + std::to_string(semaphore.in_use) +
           ",\"holders\":" + records_json(semaphore.holders, "permits") + "}";
  } else {
    out += "null";
  }
  return out;
}

}  // namespace dlock::cli
