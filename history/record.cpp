#include "record.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "event_log.hpp"

namespace dlock::history {
namespace {

using Incarnation = std::pair<std::string, long>;  // worker, pid

// Driver events: faults, skipped faults, deaths, the final counter.
void read_driver(const std::vector<Event>& events, Record& record, std::map<Incarnation, std::int64_t>& deaths) {
  bool aborted = false;
  // The restart-redis fault whose redis-up is still to come, if any (an index, or kNone: a plain
  // value, as std::optional here trips GCC 12's -Wmaybe-uninitialized at -O1, the sanitizer builds').
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t restarting = kNone;
  for (const Event& e : events) {
    if (e.kind == "fault") {
      Fault fault{e.get("kind"), e.get("how"), e.get("worker"), static_cast<long>(e.number("pid")), e.t_ns,
                  e.number("until", e.t_ns)};
      if (fault.kind == "kill-holder") deaths[{fault.worker, fault.pid}] = e.t_ns;
      if (fault.kind == "restart-redis") restarting = record.faults.size();
      record.faults.push_back(fault);
    } else if (e.kind == "redis-up") {
      if (restarting != kNone) record.faults[restarting].until_ns = e.t_ns;
      restarting = kNone;
    } else if (e.kind == "skip") {
      ++record.skipped_faults[e.get("kind")];
    } else if (e.kind == "worker-exit") {
      deaths[{e.get("worker"), static_cast<long>(e.number("pid"))}] = e.t_ns;
    } else if (e.kind == "config") {
      record.lease_ms = e.number("lease_ms", record.lease_ms);
    } else if (e.kind == "final") {
      record.final_counter = e.number("counter", -1);
    } else if (e.kind == "abort") {
      aborted = true;
      record.problems.push_back("the driver aborted: " + e.text);
    }
  }
  if (!record.final_counter && !aborted) record.problems.push_back("no final counter: the driver did not finish");
}

// One worker's stream: its holds and waits, incarnation by incarnation.
void read_worker(const std::string& who, const std::vector<Event>& events, const std::map<Incarnation, std::int64_t>& deaths,
                 Record& record) {
  std::map<long, std::size_t> latest_hold;  // pid → index into record.holds of its latest grant
  std::map<long, std::optional<std::size_t>> open_invoke;  // pid → index of its pending invoke
  std::map<long, std::pair<std::string, long long>> modes;  // pid → mode, lease
  std::map<long, const Event*> told_while_calling;          // pid → a lost notice while a call is pending
  auto tell = [&](Hold& hold, const Event& e, const std::string& via) {
    if (!hold.told_ns) {
      hold.told_ns = e.t_ns;
      hold.told_via = via;
    }
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    auto current = latest_hold.find(e.pid);
    Hold* hold = current == latest_hold.end() ? nullptr : &record.holds[current->second];
    if (hold && e.kind != "invoke" && !open_invoke[e.pid]) hold->last_event = i;  // up to its next lock() call
    if (e.kind == "start") {
      modes[e.pid] = {e.get("mode"), e.number("lease_ms", 0)};
      ++record.incarnations;
    } else if (e.kind == "invoke") {
      open_invoke[e.pid] = i;
      if (hold && hold->end_how == "open") hold->end_ns = e.t_ns;  // no `end` (a torn line): over by the next call
    } else if (e.kind == "fail" || e.kind == "grant") {
      const auto invoke = open_invoke[e.pid];
      const std::int64_t from = invoke ? events[*invoke].t_ns : e.t_ns;
      record.waits.push_back({who, from, e.t_ns});
      open_invoke[e.pid].reset();
      const Event* told = std::exchange(told_while_calling[e.pid], nullptr);
      if (e.kind == "fail") {
        ++record.failed_invokes[e.get("error", "unknown")];
        if (told && hold) tell(*hold, *told, told->get("via", "unknown"));
        continue;
      }
      Hold fresh;
      fresh.worker = who;
      fresh.pid = e.pid;
      fresh.mode = modes[e.pid].first;
      fresh.lease_ms = modes[e.pid].second > 0 ? modes[e.pid].second : record.lease_ms;
      fresh.invoke_ns = from;
      fresh.grant_ns = e.t_ns;
      fresh.token = static_cast<std::uint64_t>(e.number("token", 0));
      fresh.end_how = "open";
      fresh.first_event = invoke.value_or(i);
      fresh.last_event = i;
      if (told) tell(fresh, *told, told->get("via", "unknown"));
      record.holds.push_back(fresh);
      latest_hold[e.pid] = record.holds.size() - 1;
    } else if (e.kind == "lost" && open_invoke[e.pid]) {
      if (!told_while_calling[e.pid]) told_while_calling[e.pid] = &e;  // settled by the call's grant or fail
    } else if (!hold) {
      continue;  // read/end/lost/release with no grant before it: nothing to attach to
    } else if (e.kind == "read") {
      if (hold->end_how == "open") hold->write = Write::Unknown;  // a SET may follow; `end` says what became of it
    } else if (e.kind == "end") {
      hold->end_ns = e.t_ns;
      hold->end_how = "end";
      const std::string write = e.get("write", "none");
      hold->write = write == "ok" ? Write::Ok : write == "unknown" ? Write::Unknown : Write::None;
      if (hold->write == Write::Ok) {
        hold->written = e.number("value", -1);
        hold->write_ns = e.t_ns;
      }
      if (e.get("error") == "LockLostError") tell(*hold, e, "error");
    } else if (e.kind == "lost") {
      tell(*hold, e, e.get("via", "unknown"));
    } else if (e.kind == "release") {
      hold->released = e.get("outcome") == "ok" ? "ok" : e.get("error", "error");
      if (hold->released == "LockLostError") tell(*hold, e, "error");
    }
  }
  // Holds with no `end` and calls with no answer end at their process's death, else at the record's end.
  for (auto& [pid, index] : latest_hold) {
    Hold& hold = record.holds[index];
    if (hold.end_how != "open") continue;
    auto death = deaths.find({who, pid});
    hold.end_ns = death != deaths.end() ? death->second : record.last_ns;
    hold.end_how = death != deaths.end() ? "death" : "open";
  }
  for (auto& [pid, invoke] : open_invoke) {
    if (!invoke) continue;
    auto death = deaths.find({who, pid});
    record.waits.push_back({who, events[*invoke].t_ns, death != deaths.end() ? death->second : record.last_ns});
  }
}

}  // namespace

Record build_record(std::vector<Event> events) {
  Record record;
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });
  if (!events.empty()) {
    record.first_ns = events.front().t_ns;
    record.last_ns = events.back().t_ns;
  }
  for (Event& e : events) record.streams[e.who].push_back(std::move(e));
  std::map<Incarnation, std::int64_t> deaths;
  if (auto driver = record.streams.find("driver"); driver != record.streams.end()) {
    read_driver(driver->second, record, deaths);
  } else {
    record.problems.push_back("no driver events: faults, deaths and the final counter are unknown");
  }
  for (const auto& [who, stream] : record.streams) {
    if (who != "driver") read_worker(who, stream, deaths, record);
  }
  std::stable_sort(record.holds.begin(), record.holds.end(),
                   [](const Hold& a, const Hold& b) { return a.grant_ns < b.grant_ns; });
  return record;
}

Record load_record(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error(dir.string() + " is not a directory");
  std::vector<Event> events;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    auto more = read_events(entry.path());
    events.insert(events.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return build_record(std::move(events));
}

}  // namespace dlock::history
