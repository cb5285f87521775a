// scan_names: SCAN MATCH P{PATTERN}* TYPE hash on every master (a Redlock's nodes at once,
// a majority needed), each name told apart by its suffix and kept if its key matches PATTERN.
#include "list_scan.hpp"

#include <exception>
#include <mutex>
#include <string_view>
#include <vector>

#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/errors.hpp"
#include "glob_match.hpp"
#include "dlock/detail/node_reads.hpp"
#include "dlock/detail/redis_refusal.hpp"

namespace dlock::cli {

namespace {

// `text` matched literally by a Redis glob.
std::string glob_literal(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The names of the hashes matching `match` on one server.
std::vector<std::string> scan_hashes(RedisExecutor& redis, const std::string& match) {
  std::vector<std::string> names;
  std::string cursor = "0";
  do {
    const RedisReply reply = redis.command({"SCAN", cursor, "MATCH", match, "COUNT", "1000", "TYPE", "hash"});
    if (reply.is_error() || reply.elements.size() != 2) {
      detail::throw_refusal(detail::refusal_of(redis.endpoint(), "cannot list the locks (SCAN)", reply));
    }
    cursor = reply.elements[0].str;
    for (const RedisReply& name : reply.elements[1].elements) names.push_back(name.str);
  } while (cursor != "0");
  return names;
}

// Files `name` (P{K}...) under what it is a name of, if K matches `pattern`. A lock's
// name ends in '}' (an id, ending a record's name, never holds one); a key may hold
// "}:rw:" itself, so the last of the markers splits it.
void sort_in(FoundNames& found, std::string_view name, const std::string& prefix, const std::string& pattern) {
  const std::string_view body = name.substr(prefix.size() + 1);  // past "P{"
  const auto keep = [&](std::set<std::string>& into, std::string_view key) {
    if (glob_matches(pattern, key)) into.emplace(key);
  };
  if (body.ends_with('}')) {
    if (glob_matches(pattern, body.substr(0, body.size() - 1))) found.locks.emplace(name);
  } else if (body.ends_with("}:rw:write")) {
    keep(found.read_write, body.substr(0, body.size() - std::string_view("}:rw:write").size()));
  } else if (const std::size_t at = body.rfind("}:rw:readers:"); at != std::string_view::npos) {
    keep(found.read_write, body.substr(0, at));
  } else if (const std::size_t at = body.rfind("}:semaphore:holders:"); at != std::string_view::npos) {
    keep(found.semaphores, body.substr(0, at));
  }
}

}  // namespace

FoundNames scan_names(RedisExecutor& redis, const std::string& prefix, const std::string& pattern) {
  const std::string match = glob_literal(prefix) + "{" + pattern + "}*";
  FoundNames found;
  std::mutex mutex;  // guards `found` while a Redlock's nodes are scanned at once
  const auto scan = [&](RedisExecutor& server) {
    const std::vector<std::string> names = scan_hashes(server, match);
    std::lock_guard lock(mutex);
    for (const std::string& name : names) sort_in(found, name, prefix, pattern);
  };
  const std::vector<RedisExecutor*> nodes = redis.quorum_nodes();
  if (nodes.empty()) {
    redis.for_each_master(scan);  // SCAN's cursor is per server: a cluster is scanned master by master
    return found;
  }
  // Each node holds what it granted: a lock a majority holds is on at least one node of any majority.
  // A node that refuses SCAN (a missing right on that node alone) is passed
  // over as a node down is: the majority decides; a refusal speaks for the
  // Redlock only when a majority of the nodes gave it.
  detail::require_majority_or_refusal(detail::in_parallel(nodes.size(), [&](std::size_t i) { scan(*nodes[i]); }),
                              "list the locks");
  return found;
}

}  // namespace dlock::cli
