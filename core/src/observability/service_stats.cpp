// ServiceCore::stats(): the counters, and the gauges read from the service's
// own tables at the snapshot (the held locks, the waiting calls), so they
// cannot drift from what the service holds however a hold ended.
#include <string_view>
#include <unordered_map>

#include "dlock/detail/service_core.hpp"

namespace dlock::detail {

LockStats ServiceCore::stats() const {
  LockStats stats = stats_.snapshot();
  // The keys are copied only for the per-prefix series: a service holding a million locks
  // must not copy a million strings under its mutex, every lock() and unlock() waiting.
  const bool by_prefix = key_prefix_series_.enabled();
  std::vector<std::string> held_keys;
  {
    std::lock_guard guard(mutex_);
    if (by_prefix) held_keys.reserve(held_.size());
    stats.held = 0;
    // A lock found lost stays in the table until its guard goes, but it is no longer held.
    for (const auto& entry : held_) {
      if (entry.second->is_lost()) continue;
      ++stats.held;
      if (by_prefix) held_keys.push_back(entry.second->key);
    }
  }
  const auto waiting = waiting_calls_.by_key();
  for (const auto& [key, calls] : waiting) stats.waiting += calls;
  if (!by_prefix) return stats;

  // Series first (admitted as keys were first used; one that found no room then may find it now),
  // then the list of all of them to count into.
  std::vector<std::string> held_series, waiting_series;
  for (const std::string& key : held_keys) held_series.push_back(key_prefix_series_.series_of(key));
  for (const auto& entry : waiting) waiting_series.push_back(key_prefix_series_.series_of(entry.first));
  stats.by_key_prefix = key_prefix_series_.zeroed();
  std::unordered_map<std::string_view, KeyPrefixGauges*> by_name;
  for (KeyPrefixGauges& series : stats.by_key_prefix) by_name[series.key_prefix] = &series;
  for (const std::string& series : held_series) ++by_name.at(series)->held;
  for (std::size_t i = 0; i < waiting.size(); ++i) by_name.at(waiting_series[i])->waiting += waiting[i].second;
  return stats;
}

}  // namespace dlock::detail
