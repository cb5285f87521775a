#pragma once
// The driver's workers: N history_worker processes, each with its own
// history file, started, restarted after a kill, found while holding the
// lock, and stopped, always by their own pid.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "event_log.hpp"
#include "fault_tools.hpp"

namespace dlock::history {

struct FleetOptions {
  std::string worker_bin;
  std::filesystem::path dir;  // w<N>.log go here
  int workers = 5;
  int port = 0;
  long long lease_ms = 1000;
  unsigned seed = 1;
  long long max_seconds = 900;  // a worker's own bound, should the driver fail to stop it
};

class Fleet {
 public:
  // Starts every worker; odd ids use watchdog leases, even ids fixed ones.
  Fleet(FleetOptions options, EventLog& log);

  int size() const { return static_cast<int>(workers_.size()); }
  const dlock::test::Child& child(int index) const { return workers_[index].process; }
  std::string name(int index) const { return "w" + std::to_string(index + 1); }

  // A worker whose own last event says it is inside its critical section
  // (granted, not yet ended), looking for up to `patience`; -1 if none.
  int find_holder(std::chrono::milliseconds patience) const;

  void signal(int index, int sig) const { workers_[index].process.signal(sig); }
  // SIGKILLs and reaps worker `index`, logs the fault, and starts a new
  // process in its place (same id, same file).
  void kill_and_restart(int index);
  // SIGTERM to all, up to `grace` for them to finish their section and
  // leave, then SIGKILL for the rest; each exit is logged.
  void stop_all(std::chrono::milliseconds grace);

 private:
  struct Worker {
    std::filesystem::path file;
    dlock::test::Child process;
    int starts = 0;
  };
  void start(int index);

  FleetOptions options_;
  EventLog& log_;
  std::vector<Worker> workers_;
};

}  // namespace dlock::history
