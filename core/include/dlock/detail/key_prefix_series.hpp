#pragma once
// The `key_prefix` label of the gauges (lock.metrics): which series a key
// counts under. Listed prefixes are series from the start; prefixes the
// separator finds are admitted first seen, first served, while there is
// room, and kept: a scrape's series neither grow past the bound nor come and
// go. Every other key counts as "other".

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_options.hpp"
#include "dlock/lock_stats.hpp"

namespace dlock::detail {

class KeyPrefixSeries {
 public:
  static constexpr std::string_view kOther = "other";

  // Throws InvalidArgument, naming the lock.metrics setting, for a rule that
  // cannot be kept: more listed prefixes than max_key_prefixes, an empty
  // listed prefix, or one spelled "other".
  explicit KeyPrefixSeries(MetricsConfig config);

  bool enabled() const { return config_.breaks_down_by_key_prefix(); }
  // The series `key` counts under; admits its separator prefix if there is
  // room. Called as a key is first held or waited for, so the order of
  // admission is the order of first use, not of a scrape's walk. Thread-safe.
  std::string series_of(std::string_view key) const;
  // One zeroed entry per series admitted so far, listed ones first, then
  // found ones in order of admission, then "other". Thread-safe.
  std::vector<KeyPrefixGauges> zeroed() const;

 private:
  const MetricsConfig config_;
  mutable std::mutex mutex_;
  // Guarded by mutex_. Mutable: admitting a prefix is bookkeeping of the label, not a change of the service.
  mutable std::vector<std::string> found_;
};

}  // namespace dlock::detail
