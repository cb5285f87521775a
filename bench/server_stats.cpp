#include "server_stats.hpp"

#include <sstream>
#include <stdexcept>

namespace bench {

std::string ServerStats::info(const char* section) {
  const char* argv[] = {"INFO", section};
  const std::size_t lens[] = {4, std::char_traits<char>::length(section)};
  Reply reply = connection_.call(2, argv, lens);
  std::string text = reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : std::string();
  if (text.empty()) throw std::runtime_error(std::string("redis gave no INFO ") + section);
  return text;
}

namespace {

// "calls=12,usec=345,usec_per_call=..." → the number after `field=`.
long long field_of(const std::string& values, const std::string& field) {
  const auto at = values.find(field + "=");
  return at == std::string::npos ? 0 : std::stoll(values.substr(at + field.size() + 1));
}

}  // namespace

ServerSnapshot ServerStats::snapshot() {
  ServerSnapshot snap;
  std::istringstream commands(info("commandstats"));
  for (std::string line; std::getline(commands, line);) {
    // cmdstat_evalsha:calls=3,usec=40,usec_per_call=13.33,rejected_calls=0,failed_calls=0
    if (line.rfind("cmdstat_", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string values = line.substr(colon + 1);
    snap.commands[line.substr(8, colon - 8)] = {field_of(values, "calls"), field_of(values, "usec")};
  }
  std::istringstream cpu(info("cpu"));
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("used_cpu_user:", 0) == 0) snap.cpu_seconds += std::stod(line.substr(14));
    if (line.rfind("used_cpu_sys:", 0) == 0) snap.cpu_seconds += std::stod(line.substr(13));
  }
  return snap;
}

ServerSnapshot ServerSnapshot::since(const ServerSnapshot& earlier) const {
  ServerSnapshot delta;
  delta.cpu_seconds = cpu_seconds - earlier.cpu_seconds;
  for (const auto& [name, now] : commands) {
    const auto before = earlier.commands.find(name);
    const Command then = before == earlier.commands.end() ? Command{} : before->second;
    delta.commands[name] = {now.calls - then.calls, now.usec - then.usec};
  }
  return delta;
}

long long ServerSnapshot::usec_in(std::initializer_list<const char*> names) const {
  long long total = 0;
  for (const char* name : names) {
    const auto it = commands.find(name);
    if (it != commands.end()) total += it->second.usec;
  }
  return total;
}

long long ServerSnapshot::calls_of(const char* name) const {
  const auto it = commands.find(name);
  return it == commands.end() ? 0 : it->second.calls;
}

}  // namespace bench
