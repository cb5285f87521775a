// prometheus_text: the stats as Prometheus text, with HELP and TYPE lines per family,
// the caller's labels checked and escaped, and the acquire latency as a summary in seconds.
#include "dlock/prometheus_text.hpp"

#include <cstdint>
#include <cstdio>

#include "dlock/errors.hpp"

namespace dlock {
namespace {

bool is_label_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!word) return false;
  }
  return true;
}

// A label value as the text format writes it: \\, \" and \n escaped.
std::string escaped(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string seconds(std::chrono::microseconds micros) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", static_cast<double>(micros.count()) / 1e6);
  return text;
}

class Exposition {
 public:
  explicit Exposition(const MetricLabels& labels) {
    for (const auto& [name, value] : labels) {
      if (!is_label_name(name) || name == "quantile" || name == "key_prefix" || name.starts_with("__")) {
        throw InvalidArgument("prometheus_text: label name '" + name + "' is not allowed; use letters, digits and "
                              "'_', not starting with a digit or '__', and not 'quantile' or 'key_prefix' "
                              "(dlock's own labels)");
      }
      labels_ += (labels_.empty() ? "" : ",") + name + "=\"" + escaped(value) + "\"";
    }
  }

  void counter(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, help, "counter");
    sample(name, "", std::to_string(value));
  }

  void family(std::string_view name, std::string_view help, std::string_view type) {
    text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }

  // A gauge: one sample, or with a breakdown by key prefix one per series (they add up to the whole).
  void gauge(std::string_view name, std::string_view help, std::uint64_t whole,
             const std::vector<KeyPrefixGauges>& by_key_prefix, std::uint64_t KeyPrefixGauges::*part) {
    family(name, help, "gauge");
    if (by_key_prefix.empty()) return sample(name, "", std::to_string(whole));
    for (const KeyPrefixGauges& series : by_key_prefix) {
      sample(name, "key_prefix=\"" + escaped(series.key_prefix) + "\"", std::to_string(series.*part));
    }
  }

  // `extra` is one more label (the summary's quantile), or empty.
  void sample(std::string_view name, std::string_view extra, const std::string& value) {
    text_.append(name);
    if (!labels_.empty() || !extra.empty()) {
      text_.append("{").append(labels_).append(!labels_.empty() && !extra.empty() ? "," : "").append(extra).append("}");
    }
    text_.append(" ").append(value).append("\n");
  }

  std::string text() && { return std::move(text_); }

 private:
  std::string labels_;
  std::string text_;
};

}  // namespace

std::string prometheus_text(const LockStats& stats, const MetricLabels& labels) {
  Exposition out(labels);
  out.counter("dlock_acquired_total", "First holds granted (the lock was free).", stats.acquired);
  out.counter("dlock_reentered_total", "Holds granted to a thread that already held the key.", stats.reentered);
  out.counter("dlock_released_total", "Holds released, inner and final.", stats.released);
  out.counter("dlock_contended_total", "Calls that found the key busy and waited.", stats.contended);
  out.counter("dlock_busy_total", "Calls without a wait (try once) that found the key busy.", stats.busy);
  out.counter("dlock_timeouts_total", "Calls with a wait that gave up at its end.", stats.timeouts);
  out.counter("dlock_lost_total", "Held locks found lost.", stats.lost);
  out.counter("dlock_renewals_sent_total", "Watchdog renewals sent.", stats.renewals_sent);
  out.counter("dlock_renewals_failed_total", "Watchdog renewals that got no answer.", stats.renewals_failed);
  out.counter("dlock_renewal_rounds_total", "Watchdog round trips (renewals go out pipelined).", stats.renewal_rounds);
  out.counter("dlock_handed_over_total", "First holds granted inside another local thread's release.",
              stats.handed_over);
  out.counter("dlock_releases_failed_total", "Final releases that got no reply or an error reply (each logged).",
              stats.releases_failed);
  out.family("dlock_acquire_seconds", "Latency of granted lock calls, waiting included.", "summary");
  out.sample("dlock_acquire_seconds", "quantile=\"0.5\"", seconds(stats.acquire_p50));
  out.sample("dlock_acquire_seconds", "quantile=\"0.99\"", seconds(stats.acquire_p99));
  out.sample("dlock_acquire_seconds_sum", "", seconds(stats.acquire_total));
  out.sample("dlock_acquire_seconds_count", "", std::to_string(stats.acquire_count));
  out.family("dlock_acquire_max_seconds", "Longest granted lock call since the service started.", "gauge");
  out.sample("dlock_acquire_max_seconds", "", seconds(stats.acquire_max));
  out.gauge("dlock_held_locks", "Keys this service holds now, one per key and owner.", stats.held,
            stats.by_key_prefix, &KeyPrefixGauges::held);
  out.gauge("dlock_waiting_calls", "Acquire calls waiting now for a busy key, blocking or async.", stats.waiting,
            stats.by_key_prefix, &KeyPrefixGauges::waiting);
  return std::move(out).text();
}

}  // namespace dlock
