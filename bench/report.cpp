#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bench {

double Samples::percentile_us(int per_mille) const {
  if (ns_.empty()) return 0;
  if (!sorted_) {
    std::sort(ns_.begin(), ns_.end());
    sorted_ = true;
  }
  const std::size_t rank = static_cast<std::size_t>(std::ceil(ns_.size() * per_mille / 1000.0));
  const std::size_t index = std::clamp<std::size_t>(rank, 1, ns_.size()) - 1;
  return ns_[index] / 1000.0;
}

Report::Report(const std::string& json_path) {
  if (!json_path.empty()) json_.open(json_path);
}

void Report::section(const std::string& title) {
  section_ = title;
  std::printf("\n== %s ==\n", title.c_str());
}

void Report::figure(const std::string& name, double value, const std::string& unit, const std::string& note) {
  std::printf("  %-46s %14.2f %-8s %s\n", name.c_str(), value, unit.c_str(), note.c_str());
  std::fflush(stdout);
  if (json_.is_open()) {
    json_ << "{\"section\":\"" << section_ << "\",\"name\":\"" << name << "\",\"value\":" << value << ",\"unit\":\""
          << unit << "\"}\n";
  }
}

double Samples::rate() const {
  double total_ns = 0;
  for (std::int64_t ns : ns_) total_ns += static_cast<double>(ns);
  return total_ns > 0 ? ns_.size() / (total_ns / 1e9) : 0;
}

void Report::latency(const std::string& name, const Samples& samples) {
  figure(name + " p50", samples.percentile_us(500), "us");
  figure(name + " p99", samples.percentile_us(990), "us");
  figure(name + " rate", samples.rate(), "ops/s");
}

}  // namespace bench
