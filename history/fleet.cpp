#include "fleet.hpp"

#include <signal.h>

#include <thread>

namespace dlock::history {

Fleet::Fleet(FleetOptions options, EventLog& log) : options_(std::move(options)), log_(log) {
  workers_.resize(static_cast<std::size_t>(options_.workers));
  for (int i = 0; i < size(); ++i) {
    workers_[i].file = options_.dir / (name(i) + ".log");
    start(i);
  }
}

void Fleet::start(int index) {
  Worker& worker = workers_[index];
  const unsigned seed = options_.seed * 1000 + static_cast<unsigned>(index) * 100 + static_cast<unsigned>(worker.starts++);
  worker.process.start({options_.worker_bin, "--port", std::to_string(options_.port), "--id",
                        std::to_string(index + 1), "--file", worker.file.string(), "--mode",
                        index % 2 == 0 ? "watchdog" : "fixed",
                        // The third and fourth workers (one of each lease mode) use the async API.
                        "--api", index == 2 || index == 3 ? "async" : "blocking",
                        // The fifth ends its holds by the guard's destructor: a release nobody waits for.
                        "--release", index == 4 ? "destructor" : "unlock",
                        "--lease-ms", std::to_string(options_.lease_ms),
                        "--seed", std::to_string(seed), "--max-seconds", std::to_string(options_.max_seconds)});
  log_.append("worker-start", {{"worker", name(index)}, {"pid", std::to_string(worker.process.pid())}});
}

int Fleet::find_holder(std::chrono::milliseconds patience) const {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  do {
    for (int i = 0; i < size(); ++i) {
      const auto events = last_events(workers_[i].file, 8);
      // The hook's `lost` may come from another thread at any time; the
      // worker's own last step is the last event that is not one.
      for (auto it = events.rbegin(); it != events.rend(); ++it) {
        if (it->kind == "lost") continue;
        if (it->pid == workers_[i].process.pid() && (it->kind == "grant" || it->kind == "read")) return i;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

void Fleet::kill_and_restart(int index) {
  const pid_t pid = workers_[index].process.pid();
  workers_[index].process.kill_now();  // SIGKILL and reap: the stamp below is after its death
  log_.append("fault", {{"kind", "kill-holder"}, {"worker", name(index)}, {"pid", std::to_string(pid)}});
  start(index);
}

void Fleet::stop_all(std::chrono::milliseconds grace) {
  for (auto& worker : workers_) worker.process.signal(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (int i = 0; i < size(); ++i) {
    auto& process = workers_[i].process;
    const pid_t pid = process.pid();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::string how = "exit";
    if (!process.wait_for(std::max(left, std::chrono::milliseconds(1)))) {
      process.kill_now();
      how = "kill";
    }
    log_.append("worker-exit", {{"worker", name(i)}, {"pid", std::to_string(pid)}, {"how", how}});
  }
}

}  // namespace dlock::history
