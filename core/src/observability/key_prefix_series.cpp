// KeyPrefixSeries: the bounded key_prefix label of the held and waiting gauges.
#include "dlock/detail/key_prefix_series.hpp"

#include <algorithm>
#include <utility>

#include "dlock/errors.hpp"

namespace dlock::detail {

KeyPrefixSeries::KeyPrefixSeries(MetricsConfig config) : config_(std::move(config)) {
  if (config_.key_prefixes.size() > config_.max_key_prefixes) {
    throw InvalidArgument("lock.metrics.key_prefixes lists " + std::to_string(config_.key_prefixes.size()) +
                          " prefixes, more than lock.metrics.max_key_prefixes (" +
                          std::to_string(config_.max_key_prefixes) + "); list fewer or raise the bound");
  }
  for (const std::string& prefix : config_.key_prefixes) {
    if (prefix.empty() || prefix == kOther) {
      throw InvalidArgument("lock.metrics.key_prefixes lists '" + prefix +
                            "'; a prefix must not be empty, nor \"other\" (the series of keys no prefix matches)");
    }
    if (std::count(config_.key_prefixes.begin(), config_.key_prefixes.end(), prefix) > 1) {
      throw InvalidArgument("lock.metrics.key_prefixes lists '" + prefix + "' twice; list each prefix once");
    }
  }
}

std::string KeyPrefixSeries::series_of(std::string_view key) const {
  const std::string* longest = nullptr;
  for (const std::string& prefix : config_.key_prefixes) {
    if (key.starts_with(prefix) && (longest == nullptr || prefix.size() > longest->size())) longest = &prefix;
  }
  if (longest != nullptr) return *longest;
  if (config_.key_prefix_separator.empty()) return std::string(kOther);
  const std::size_t at = key.find(config_.key_prefix_separator);
  if (at == std::string_view::npos) return std::string(kOther);
  std::string prefix(key.substr(0, at + config_.key_prefix_separator.size()));
  if (prefix == kOther) return prefix;  // a key's own "other" is the fold's series, not a second one
  std::lock_guard lock(mutex_);
  if (std::find(found_.begin(), found_.end(), prefix) != found_.end()) return prefix;
  if (config_.key_prefixes.size() + found_.size() >= config_.max_key_prefixes) return std::string(kOther);
  found_.push_back(prefix);
  return prefix;
}

std::vector<KeyPrefixGauges> KeyPrefixSeries::zeroed() const {
  std::vector<KeyPrefixGauges> series;
  for (const std::string& prefix : config_.key_prefixes) series.push_back(KeyPrefixGauges{.key_prefix = prefix});
  {
    std::lock_guard lock(mutex_);
    for (const std::string& prefix : found_) series.push_back(KeyPrefixGauges{.key_prefix = prefix});
  }
  series.push_back(KeyPrefixGauges{.key_prefix = std::string(kOther)});
  return series;
}

}  // namespace dlock::detail
