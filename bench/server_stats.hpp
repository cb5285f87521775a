#pragma once
// The server's own account of its time: `INFO commandstats` (microseconds
// spent in each command, a script's inner calls included in its EVALSHA) and
// `INFO cpu` (the process' user+system CPU seconds). Differences of two
// snapshots, taken on a connection of its own, cost what a block of cycles
// cost the server, whichever client sent them.

#include <map>
#include <string>

#include "raw_connection.hpp"

namespace bench {

struct ServerSnapshot {
  struct Command {
    long long calls = 0;
    long long usec = 0;
  };
  std::map<std::string, Command> commands;  // "evalsha", "set", ... as INFO names them
  double cpu_seconds = 0;                   // used_cpu_user + used_cpu_sys

  // This snapshot minus an earlier one.
  ServerSnapshot since(const ServerSnapshot& earlier) const;
  // Microseconds spent in the named top-level commands (not counting the
  // inner calls of scripts: those are inside EVALSHA's figure already).
  long long usec_in(std::initializer_list<const char*> names) const;
  long long calls_of(const char* name) const;
};

class ServerStats {
 public:
  ServerStats(const std::string& host, int port) : connection_(host, port) {}

  ServerSnapshot snapshot();

 private:
  std::string info(const char* section);

  RawConnection connection_;
};

}  // namespace bench
