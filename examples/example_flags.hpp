#pragma once
// The examples' command-line flags: --name value and --switch, nothing more.

#include <map>
#include <set>
#include <string>

namespace example {

class Flags {
 public:
  // `valued` flags take a value, `switches` do not. Unknown flags, missing
  // values and --help print `usage` and exit (64 on error, 0 for --help).
  Flags(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& switches,
        const std::string& usage);

  std::string text(const std::string& name, const std::string& fallback) const;
  // A whole number ≥ min; anything else prints usage and exits 64.
  long long number(const std::string& name, long long fallback, long long min) const;
  // Whether the switch, or the valued flag, was given.
  bool has(const std::string& name) const;

 private:
  [[noreturn]] void fail(const std::string& why) const;

  std::string usage_;
  std::map<std::string, std::string> values_;
  std::set<std::string> switches_;
};

}  // namespace example
