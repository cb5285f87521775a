// `dlock status`'s lines for the read-write lock and the semaphore of the same name, as the
// library read them (or the refusal of a part), printed as text or JSON.
#include "shared_status.hpp"

#include <chrono>
#include <sstream>

#include "json.hpp"
#include "holders.hpp"

namespace dlock::cli {

namespace {

std::string lease_text(const std::optional<std::chrono::milliseconds>& lease_left) {
  return lease_left ? std::to_string(lease_left->count()) + "ms left" : std::string("without expiry");
}

std::string record_json(const LockHolder& r, const char* count_name) {
  return "{\"token\":" + json_string(r.owner) + ",\"" + count_name + "\":" + std::to_string(r.hold_count) +
         holder_json_fields(r) +
         ",\"lease_ms\":" + (r.lease_left ? std::to_string(r.lease_left->count()) : std::string("null")) + "}";
}

std::string records_json(const std::vector<LockHolder>& records, const char* count_name) {
  std::string out = "[";
  for (std::size_t i = 0; i < records.size(); ++i) out += (i ? "," : "") + record_json(records[i], count_name);
  return out + "]";
}

}  // namespace

std::string shared_status_text(const std::string& key, const detail::SharedReading& status, long long now_ms) {
  std::ostringstream out;
  const ReadWriteLockStatus& rw = status.read_write.status;
  if (status.read_write.refusal) {
    out << key << " (read-write): unknown; " << status.read_write.refusal.error << "\n";
  } else if (rw.held()) {
    out << key << " (read-write): ";
    if (rw.writer) {
      out << "write-locked by " << holder_text(*rw.writer, now_ms) << ", owner " << rw.writer->owner
          << " (hold count " << rw.writer->hold_count << "), lease " << lease_text(rw.writer->lease_left);
      if (!rw.readers.empty()) out << "; ";
    }
    if (!rw.readers.empty()) out << "read-locked by " << rw.readers.size() << " reader(s)";
    for (std::size_t i = 0; i < rw.readers.size(); ++i) {
      const LockHolder& r = rw.readers[i];
      out << (i ? "; " : ": ") << holder_text(r, now_ms) << ", owner " << r.owner << " (hold count " << r.hold_count
          << "), lease " << lease_text(r.lease_left);
    }
    out << "\n";
  }
  const SemaphoreStatus& semaphore = status.semaphore.status;
  if (status.semaphore.refusal) {
    out << key << " (semaphore): unknown; " << status.semaphore.refusal.error << "\n";
  } else if (semaphore.exists()) {
    out << key << " (semaphore): " << semaphore.in_use << " of "
        << (semaphore.permits ? std::to_string(*semaphore.permits) : std::string("(no count)")) << " permits held";
    for (std::size_t i = 0; i < semaphore.holders.size(); ++i) {
      const LockHolder& r = semaphore.holders[i];
      out << (i ? "; " : ": ") << r.hold_count << " by " << holder_text(r, now_ms) << ", owner " << r.owner
          << ", lease " << lease_text(r.lease_left);
    }
    out << "\n";
  }
  return out.str();
}

std::string shared_status_json(const detail::SharedReading& status) {
  const ReadWriteLockStatus& rw = status.read_write.status;
  const SemaphoreStatus& semaphore = status.semaphore.status;
  std::string out = ",\"read_write\":";
  if (status.read_write.refusal) {
    out += "{\"error\":" + json_string(status.read_write.refusal.error) + "}";
  } else if (rw.held()) {
    out += "{\"writer\":" + (rw.writer ? record_json(*rw.writer, "hold_count") : std::string("null")) +
           ",\"readers\":" + records_json(rw.readers, "hold_count") + "}";
  } else {
    out += "null";
  }
  out += ",\"semaphore\":";
  if (status.semaphore.refusal) {
    out += "{\"error\":" + json_string(status.semaphore.refusal.error) + "}";
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
