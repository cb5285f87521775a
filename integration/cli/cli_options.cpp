// The subcommands' argument parser: long options with a value (spaced or after '='),
// switches, positionals, and the COMMAND that follows them or `--`.
#include "cli_options.hpp"

namespace dlock::cli {

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

ParsedArgs parse_args(std::span<char* const> args, const OptionSpec& spec) {
  ParsedArgs parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string arg = args[i];
    const bool command_starts =
        spec.command_after_positionals && parsed.positionals.size() >= *spec.command_after_positionals;
    if (arg == "--") {
      for (++i; i < args.size(); ++i) {
        (spec.command_after_positionals ? parsed.command : parsed.positionals).emplace_back(args[i]);
      }
      break;
    }
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      const auto equals = arg.find('=');
      const std::string name = arg.substr(0, equals);
      if (spec.valued.count(name)) {
        if (equals != std::string::npos) {
          parsed.values[name] = arg.substr(equals + 1);
        } else if (i + 1 < args.size()) {
          parsed.values[name] = args[++i];
        } else {
          throw UsageError(name + " needs a value");
        }
      } else if (spec.switches.count(name)) {
        if (equals != std::string::npos) throw UsageError(name + " takes no value");
        parsed.switches.insert(name);
      } else {
        throw UsageError("unknown option " + name);
      }
      continue;
    }
    if (command_starts) {
      for (; i < args.size(); ++i) parsed.command.emplace_back(args[i]);
      break;
    }
    parsed.positionals.push_back(arg);
  }
  return parsed;
}

}  // namespace dlock::cli
