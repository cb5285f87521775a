#pragma once
// How the examples turn dlock errors into a message and a sysexits code.

#include <functional>

namespace example {

// Runs `body` and returns its exit status; a ConfigError gives 78
// (EX_CONFIG), a ConnectionError 69 (EX_UNAVAILABLE), any other error 1,
// each after a one-line message on stderr.
int run_reporting_errors(const std::function<int()>& body);

}  // namespace example
