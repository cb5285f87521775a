// A cluster's layout read from its replies: CLUSTER SLOTS into slot ranges and their
// nodes, MOVED and ASK into redirections; an empty host is the answering node's.
#include "cluster/cluster_replies.hpp"

#include <charconv>
#include <string_view>

#include "cluster/hash_slot.hpp"

namespace dlock::detail {
namespace {

std::optional<long long> number(std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool valid_port(long long port) { return port > 0 && port <= 65535; }

std::string host_or(const std::string& host, const std::string& fallback) {
  return host.empty() || host == "?" ? fallback : host;
}

// [host, port, id, ...] of one node in a CLUSTER SLOTS range.
std::optional<NodeAddress> node_of(const RedisReply& node, const std::string& asked_host) {
  if (node.type != RedisReply::Type::Array || node.elements.size() < 2) return std::nullopt;
  const RedisReply& host = node.elements[0];
  const RedisReply& port = node.elements[1];
  if (host.type != RedisReply::Type::String || port.type != RedisReply::Type::Integer || !valid_port(port.integer)) {
    return std::nullopt;
  }
  return NodeAddress{host_or(host.str, asked_host), static_cast<int>(port.integer)};
}

}  // namespace

std::optional<std::vector<SlotRange>> parse_cluster_slots(const RedisReply& reply, const std::string& asked_host) {
  if (reply.type != RedisReply::Type::Array) return std::nullopt;
  std::vector<SlotRange> ranges;
  for (const RedisReply& entry : reply.elements) {
    if (entry.type != RedisReply::Type::Array || entry.elements.size() < 3) return std::nullopt;
    const RedisReply& first = entry.elements[0];
    const RedisReply& last = entry.elements[1];
    if (first.type != RedisReply::Type::Integer || last.type != RedisReply::Type::Integer) return std::nullopt;
    if (first.integer < 0 || last.integer < first.integer || last.integer >= kSlotCount) continue;
    const std::optional<NodeAddress> master = node_of(entry.elements[2], asked_host);
    if (!master) continue;
    SlotRange range{static_cast<std::uint16_t>(first.integer), static_cast<std::uint16_t>(last.integer), *master, {}};
    for (std::size_t i = 3; i < entry.elements.size(); ++i) {
      if (auto replica = node_of(entry.elements[i], asked_host)) range.replicas.push_back(std::move(*replica));
    }
    ranges.push_back(std::move(range));
  }
  return ranges;
}

std::optional<Redirect> redirect_of(const RedisReply& reply, const std::string& answering_host) {
  if (!reply.is_error()) return std::nullopt;
  std::string_view text = reply.str;
  Redirect redirect;
  if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    redirect.kind = Redirect::Kind::ask;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = number(text.substr(0, space));
  const std::string_view address = text.substr(space + 1);
  const std::size_t colon = address.rfind(':');
  if (!slot || *slot < 0 || *slot >= kSlotCount || colon == std::string_view::npos) return std::nullopt;
  const auto port = number(address.substr(colon + 1));
  if (!port || !valid_port(*port)) return std::nullopt;
  std::string host(address.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  redirect.slot = static_cast<std::uint16_t>(*slot);
  redirect.to = NodeAddress{host_or(host, answering_host), static_cast<int>(*port)};
  return redirect;
}

}  // namespace dlock::detail
