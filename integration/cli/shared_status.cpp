// `dlock status`'s lines for the read-write lock and the semaphore of the same name: the
// script's reply read into writer, readers and permit holders, then printed as text or JSON.
#include "shared_status.hpp"

#include <sstream>

#include "json.hpp"
#include "redis_refusal.hpp"
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

}  // namespace

SharedStatus read_shared_status(CliScript& script, HolderDirectory& holders, const std::string& endpoint,
                                const LockConfig& config, const std::string& key) {
  const std::string rw = config.key_prefix + "{" + key + "}:rw";
  const std::string semaphore = config.key_prefix + "{" + key + "}:semaphore";
  const RedisReply reply = script.run({rw + ":write", rw + ":readers", semaphore, semaphore + ":holders"});
  SharedStatus status;
  auto refused = [&](const std::string& what, const RedisReply& r) {
    status.error = describe_refusal(endpoint, "cannot read " + what,
                                    r.is_error() ? r.str : std::string("an unexpected reply"));
    status.refused_for_now = r.is_error() && refused_for_now(r.str);
    return status;
  };
  if (reply.is_error() || reply.elements.size() != 5) return refused("the read-write lock and semaphore of " + key, reply);
  const RedisReply& writer = reply.elements[0];
  if (writer.is_error()) return refused(rw + ":write", writer);
  if (writer.elements.size() >= 2) {
    status.writer = RecordHolder{holders.holder(writer.elements[0].str, integer_of(writer.elements[1]).value_or(0)),
                                 lease_of(reply.elements[1].integer)};
  }
  if (reply.elements[2].is_error()) return refused(rw + ":readers", reply.elements[2]);
  status.readers = holders_of(reply.elements[2], holders);
  const RedisReply& count = reply.elements[3];
  if (count.is_error()) return refused(semaphore, count);
  if (!count.str.empty()) {
    status.permits = integer_of(count);
    if (!status.permits) {
      status.error = "redis " + endpoint + ": " + semaphore + " is not a permit count; another program uses that "
                     "name: delete it or choose another lock.key_prefix";
      return status;
    }
  }
  if (reply.elements[4].is_error()) return refused(semaphore + ":holders", reply.elements[4]);
  status.permit_holders = holders_of(reply.elements[4], holders);
  for (const RecordHolder& r : status.permit_holders) status.permits_in_use += r.holder.hold_count;
  return status;
}

std::string shared_status_text(const std::string& key, const SharedStatus& status, long long now_ms) {
  std::ostringstream out;
  if (!status.error.empty()) {
    out << key << " (read-write, semaphore): unknown; " << status.error << "\n";
    return out.str();
  }
  if (status.has_read_write()) {
    out << key << " (read-write): ";
    if (status.writer) {
      out << "write-locked by " << holder_text(status.writer->holder, now_ms) << ", owner "
          << status.writer->holder.owner << " (hold count " << status.writer->holder.hold_count << "), lease "
          << lease_text(status.writer->lease_ms);
      if (!status.readers.empty()) out << "; ";
    }
    if (!status.readers.empty()) out << "read-locked by " << status.readers.size() << " reader(s)";
    for (std::size_t i = 0; i < status.readers.size(); ++i) {
      const RecordHolder& r = status.readers[i];
      out << (i ? "; " : ": ") << holder_text(r.holder, now_ms) << ", owner " << r.holder.owner << " (hold count "
          << r.holder.hold_count << "), lease " << lease_text(r.lease_ms);
    }
    out << "\n";
  }
  if (status.has_semaphore()) {
    out << key << " (semaphore): " << status.permits_in_use << " of "
        << (status.permits ? std::to_string(*status.permits) : std::string("(no count)")) << " permits held";
    for (std::size_t i = 0; i < status.permit_holders.size(); ++i) {
      const RecordHolder& r = status.permit_holders[i];
      out << (i ? "; " : ": ") << r.holder.hold_count << " by " << holder_text(r.holder, now_ms) << ", owner "
          << r.holder.owner << ", lease " << lease_text(r.lease_ms);
    }
    out << "\n";
  }
  return out.str();
}

std::string shared_status_json(const SharedStatus& status) {
  std::string out = ",\"read_write\":";
  if (status.has_read_write()) {
    out += "{\"writer\":" + (status.writer ? record_json(*status.writer, "hold_count") : std::string("null")) +
           ",\"readers\":" + records_json(status.readers, "hold_count") + "}";
  } else {
    out += "null";
  }
  out += ",\"semaphore\":";
  if (status.has_semaphore()) {
    out += "{\"permits\":" + (status.permits ? std::to_string(*status.permits) : std::string("null")) +
           ",\"in_use\":" + std::to_string(status.permits_in_use) +
           ",\"holders\":" + records_json(status.permit_holders, "permits") + "}";
  } else {
    out += "null";
  }
  return out;
}

}  // namespace dlock::cli
