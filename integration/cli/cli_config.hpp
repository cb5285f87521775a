#pragma once
// Which configuration a `dlock` subcommand uses.

#include <set>
#include <string>

#include "cli_options.hpp"
#include "dlock/config.hpp"

namespace dlock::cli {

// `--config FILE` if given, else the file named by $DLOCK_CONFIG if set and
// non-empty, both read by load_config (which applies the DLOCK_REDIS_*
// overrides itself): the whole file, or with `--section NAME` only that
// section of a service's own file; else the built-in defaults (Config{})
// with DLOCK_REDIS_HOST, DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD applied
// here. Throws ConfigError for a bad file or a bad DLOCK_REDIS_PORT.
Config resolve_config(const ParsedArgs& parsed);

// The options every command takes for it.
inline const std::set<std::string> kConfigOptions{"--config", "--section"};

}  // namespace dlock::cli
