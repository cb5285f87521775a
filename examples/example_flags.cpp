#include "example_flags.hpp"

#include <charconv>
#include <cstdlib>
#include <iostream>

namespace example {

Flags::Flags(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& switches,
             const std::string& usage)
    : usage_(usage) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage_;
      std::exit(0);
    }
    if (valued.count(arg)) {
      if (i + 1 >= argc) fail(arg + " needs a value");
      values_[arg] = argv[++i];
    } else if (switches.count(arg)) {
      switches_.insert(arg);
    } else {
      fail("unknown option " + arg);
    }
  }
}

void Flags::fail(const std::string& why) const {
  std::cerr << "error: " << why << "\n" << usage_;
  std::exit(64);
}

std::string Flags::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

long long Flags::number(const std::string& name, long long fallback, long long min) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  long long value = 0;
  const std::string& s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < min) {
    fail(name + " expects a whole number of at least " + std::to_string(min) + ", got '" + s + "'");
  }
  return value;
}

bool Flags::has(const std::string& name) const { return switches_.count(name) > 0 || values_.count(name) > 0; }

}  // namespace example
