#pragma once
// Command-line parsing for the subcommands: long options (`--name VALUE`,
// `--name=VALUE`, `--switch`), positional arguments, and `--`.

#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

// A bad command line: the message says what is wrong; the caller prints it
// with the subcommand's usage and exits 64.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::set<std::string> valued;    // options that take a value, e.g. "--wait"
  std::set<std::string> switches;  // options that take none, e.g. "--json"
  // When set, the command line ends in a command to run: `--`, or the first
  // positional argument after this many, starts it, and everything from there
  // on belongs to the command untouched.
  std::optional<std::size_t> command_after_positionals;
};

struct ParsedArgs {
  std::map<std::string, std::string> values;
  std::set<std::string> switches;
  std::vector<std::string> positionals;
  std::vector<std::string> command;  // only with OptionSpec::command_after_positionals
  bool help = false;                 // --help or -h was given

  std::optional<std::string> value(const std::string& name) const;
  bool has(const std::string& name) const { return switches.count(name) != 0; }
};

// Parses the arguments after the subcommand's name. Throws UsageError for an
// unknown option, a missing value, or a value given to a switch.
ParsedArgs parse_args(std::span<char* const> args, const OptionSpec& spec);

}  // namespace dlock::cli
