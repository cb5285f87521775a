#pragma once
// RedisLockService::stats() in the Prometheus text exposition format, for a
// service to serve on its own /metrics endpoint (dlock runs no HTTP server):
//
//   http_response(dlock::prometheus_text(service->stats(), {{"service", "inventory"}}));
//
// Counters end in _total; the acquire latency is a summary in seconds
// (quantiles 0.5 and 0.99, _sum, _count) plus a gauge of its maximum. Two
// gauges say what is true now: dlock_held_locks and dlock_waiting_calls;
// with lock.metrics set (MetricsConfig) they come as one series per key
// prefix, label key_prefix, bounded, "other" taking the rest.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/lock_stats.hpp"

namespace dlock {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Every sample carries `labels` (values are escaped as the format requires).
// Throws InvalidArgument for a label name that is not [a-zA-Z_][a-zA-Z0-9_]*,
// or that is "quantile" or "key_prefix" (dlock's own labels).
std::string prometheus_text(const LockStats& stats, const MetricLabels& labels = {});

}  // namespace dlock
