#pragma once
// Collecting samples and printing figures: a readable table on stdout and,
// optionally, one JSON object per figure (JSON lines) in a file.

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

// Durations in nanoseconds; percentiles by nearest rank.
class Samples {
 public:
  void add(Clock::duration d) { ns_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()); }
  // Operations per second if the samples ran back to back.
  double rate() const;
  void add_ns(std::int64_t ns) { ns_.push_back(ns); }
  void append(const Samples& other) { ns_.insert(ns_.end(), other.ns_.begin(), other.ns_.end()); }
  std::size_t size() const { return ns_.size(); }
  // In microseconds; per_mille 500 = p50, 999 = p99.9, 1000 = max.
  double percentile_us(int per_mille) const;

 private:
  mutable std::vector<std::int64_t> ns_;
  mutable bool sorted_ = false;
};

class Report {
 public:
  explicit Report(const std::string& json_path);
  void section(const std::string& title);
  void figure(const std::string& name, double value, const std::string& unit, const std::string& note = "");
  void latency(const std::string& name, const Samples& samples);

 private:
  std::ofstream json_;
  std::string section_;
};

}  // namespace bench
