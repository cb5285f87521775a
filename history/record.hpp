#pragma once
// A history as the checker sees it: the events of every file turned into
// holds (one per granted lock() call), waits, faults and deaths.
//
// A hold is the time its worker knew it held the lock: from its `grant`
// (lock() had returned) to its `end` (recorded before unlock() is called).
// Redis had granted it before the first and released it after the second,
// so two holds that overlap here did overlap in Redis too. A hold with no
// `end` ends at its process's death (the driver's stamp, taken after the
// process was reaped), or, failing that, at the end of the record ("open").
//
// A `lost` event belongs to the hold of its process's current call: the
// latest hold when no lock() call is pending; when one is, the hold its grant
// creates (the on_lost hook may run before lock() returns, for a hold already
// lost by the local clock), or, should that call fail, the previous hold (the
// notice came late). An `end` or `release` that failed with LockLostError
// counts as a lost notice of its hold too.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "event.hpp"

namespace dlock::history {

enum class Write { None, Ok, Unknown };  // the section's SET: not sent / acknowledged / sent, no answer

struct Hold {
  std::string worker;  // "w3"
  long pid = 0;
  std::string mode;    // "watchdog" or "fixed", from the incarnation's `start`
  long long lease_ms = 0;
  std::int64_t invoke_ns = 0;
  std::int64_t grant_ns = 0;
  std::int64_t end_ns = 0;
  std::string end_how = "end";  // "end", "death" or "open"
  std::uint64_t token = 0;
  std::string released = "never";       // the release's outcome: ok, or the error class
  std::optional<std::int64_t> told_ns;  // first lost notice
  std::string told_via;                 // hook, flag, error
  Write write = Write::None;
  long long written = 0;        // the value SET, when write is Ok
  std::int64_t write_ns = 0;    // when the SET was acknowledged
  std::size_t first_event = 0;  // its invoke..last event, as indices into the worker's stream
  std::size_t last_event = 0;
};

// A lock() call from its invoke until it returned, threw, or its process died.
struct Wait {
  std::string worker;
  std::int64_t from_ns = 0;
  std::int64_t until_ns = 0;
};

struct Fault {
  std::string kind;    // kill-holder, stop-holder, stop-redis, restart-redis, client-kill
  std::string how;     // restart-redis: term, kill, or forget (dlock's keys deleted first)
  std::string worker;  // holder faults
  long pid = 0;
  std::int64_t from_ns = 0;
  std::int64_t until_ns = 0;  // the stops' SIGCONT, a restart's redis-up; == from_ns for instant faults
};

struct Record {
  std::map<std::string, std::vector<Event>> streams;  // per `who`, in time order
  std::vector<Hold> holds;                            // in grant order
  std::vector<Wait> waits;
  std::vector<Fault> faults;
  std::map<std::string, int> skipped_faults;           // by kind: no holder to hit
  std::map<std::string, int> failed_invokes;           // by error class
  std::optional<long long> final_counter;
  long long lease_ms = 1000;                           // the driver's --lease-ms, for holds without `start`
  std::int64_t first_ns = 0;
  std::int64_t last_ns = 0;
  int incarnations = 0;                                // worker processes seen
  std::vector<std::string> problems;                   // the record itself is incomplete
};

// Builds the record from events of any files, in any order.
Record build_record(std::vector<Event> events);

// Reads DIR/driver.log and every DIR/w*.log; throws std::runtime_error if
// the directory or a file cannot be read.
Record load_record(const std::filesystem::path& dir);

}  // namespace dlock::history
