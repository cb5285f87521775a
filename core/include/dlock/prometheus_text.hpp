#pragma once
// RedisLockService::stats() in the Prometheus text exposition format, for a
// service to serve on its own /metrics endpoint (dlock runs no HTTP server):
//
//   http_response(dlock::prometheus_text(service->stats(), {{"service", "inventory"}}));
//
// Counters end in _total; the acquire latency is a summary in seconds
// (quantiles 0.5 and 0.99, _sum, _count) plus a gauge of its maximum.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/lock_stats.hpp"

namespace dlock {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Every sample carries `labels` (values are escaped as the format requires).
// Throws InvalidArgument for a label name that is not [a-zA-Z_][a-zA-Z0-9_]*,
// or that is "quantile" (the summary's own label).
std::string prometheus_text(const LockStats& stats, const MetricLabels& labels = {});

}  // namespace dlock
