// `dlock list` printed: the rows as JSON objects or as an aligned table, and the count of each
// kind held for the line under it.
#include "list_output.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "dlock/detail/key_label.hpp"
#include "holders.hpp"
#include "json.hpp"

namespace dlock::cli {

namespace {

std::string json_number(const std::optional<long long>& value) { return value ? std::to_string(*value) : "null"; }

std::string number_text(const std::optional<long long>& value, const char* none) {
  return value ? std::to_string(*value) : none;
}

// "2", or a semaphore holder's "2 of 5" permits.
std::string holds_text(const ListRow& row) {
  if (!row.holder) return "?";
  const std::string held = std::to_string(row.holder->hold_count);
  return row.kind == "semaphore" ? held + " of " + number_text(row.permits, "?") : held;
}

std::string lease_text(const ListRow& row) {
  if (!row.holder) return "?";
  return row.lease_ms ? std::to_string(*row.lease_ms) + "ms" : "no expiry";
}

std::string aligned(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
  return out.str();
}

// "1 lock", "2 read-write locks".
std::string counted(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace

std::string list_json(const std::vector<ListRow>& rows) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ListRow& row = rows[i];
    out << (i ? ",\n " : "") << "{\"key\":" << json_string(row.key) << ",\"kind\":" << json_string(row.kind)
        << ",\"owner\":" << (row.holder ? json_string(row.holder->owner) : "null")
        << ",\"hold_count\":" << (row.holder ? std::to_string(row.holder->hold_count) : "null")
        << holder_json_fields(row.holder.value_or(LockHolder{})) << ",\"lease_ms\":" << json_number(row.lease_ms)
        << ",\"waiters\":" << json_number(row.waiters) << ",\"fencing_token\":" << json_number(row.fencing_token)
        << ",\"permits\":" << json_number(row.permits) << ",\"lock_name\":" << json_string(row.lock_name);
    if (!row.error.empty()) out << ",\"error\":" << json_string(row.error);
    out << "}";
  }
  out << "]\n";
  return out.str();
}

std::string list_table(const std::vector<ListRow>& rows, long long now_ms) {
  std::vector<std::vector<std::string>> cells{{"KEY", "KIND", "HELD BY", "HOLDS", "LEASE LEFT", "WAITERS",
                                               "FENCING TOKEN"}};
  std::string unknown;
  for (const ListRow& row : rows) {
    const std::string key = detail::printable(row.key);
    if (!row.error.empty()) unknown += key + ": unknown; " + row.error + "\n";
    cells.push_back({key, row.kind, row.holder ? holder_text(*row.holder, now_ms) : "unknown (see below)",
                     holds_text(row), lease_text(row),
                     number_text(row.waiters, "?"), number_text(row.fencing_token, row.holder ? "none" : "?")});
  }
  return aligned(cells) + unknown;
}

std::string held_summary(const std::vector<ListRow>& rows) {
  std::set<std::pair<std::string, std::string>> held;  // (kind of thing, key): each once
  for (const ListRow& row : rows) {
    if (row.holder) held.emplace(row.kind == "write" || row.kind == "read" ? "read-write lock" : row.kind, row.key);
  }
  std::vector<std::string> parts;
  for (const char* noun : {"lock", "read-write lock", "semaphore"}) {
    const auto n = static_cast<std::size_t>(
        std::count_if(held.begin(), held.end(), [&](const auto& entry) { return entry.first == noun; }));
    if (n > 0) parts.push_back(counted(n, noun));
  }
  std::string summary;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    summary += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return summary;
}

}  // namespace dlock::cli
