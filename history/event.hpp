#pragma once
// One line of a history: what one process saw or did, and when.
//
// Every worker appends to its own file and the driver to driver.log; the
// checker merges them by time. A line is
//
//   <t_ns> <who> <pid> <kind>[ key=value ...][ text=free text to the end]
//
// t_ns is CLOCK_MONOTONIC in nanoseconds: one clock for every process on the
// machine, so lines of different files compare. `who` is `w<N>` for worker N
// (the same N across its restarts; the pid tells the incarnations apart) or
// `driver`. Values never contain spaces; `text` (an exception's message) is
// last and runs to the end of the line, with '\' and newlines escaped.
//
// Worker kinds, in the order one cycle writes them:
//   start    mode=watchdog|fixed lease_ms=N     a worker process began
//   invoke                                       lock() is about to be called
//   fail     error=CLASS text=...               lock() threw
//   grant    token=N                             lock() returned a guard
//   read     value=N                             the counter's GET answered (a SET may follow)
//   end      write=ok value=N                    the section's SET was acknowledged
//   end      write=none|unknown error=CLASS text=...   the section threw; `unknown` when a SET
//                                                went out and got no answer, so it may have landed
//   lost     via=hook|flag|error                 a lost notice: on_lost ran, lost() was true, or
//                                                check()/unlock() threw LockLostError
//   release  outcome=ok | outcome=error error=CLASS text=...
//   stop                                         the worker leaves after SIGTERM
//   connect-fail error=CLASS text=...           make_lock_service failed at start (Redis down); retried
// Driver kinds:
//   config   seed=N workers=N lease_ms=N seconds=N
//   redis-up pid=N                               Redis answers (at start and after each restart)
//   worker-start  worker=wN pid=N
//   worker-exit   worker=wN pid=N how=exit|kill  (stamped after the process was reaped)
//   fault    kind=kill-holder worker=wN pid=N     (stamped after the process was reaped)
//   fault    kind=stop-holder worker=wN pid=N until=T_NS   (stamped at SIGSTOP; until = SIGCONT)
//   fault    kind=stop-redis until=T_NS
//   fault    kind=restart-redis how=term|kill|forget   then  redis-up  once it answers again
//                                                (forget: dlock's keys were deleted just before the kill)
//   fault    kind=client-kill killed=N
//   skip     kind=...                             a holder fault found no holder to hit
//   final    counter=N                            the counter after every worker stopped
//   abort    text=...                             the driver gave up (the record is incomplete)

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::history {

struct Event {
  std::int64_t t_ns = 0;
  std::string who;   // "w3" or "driver"
  long pid = 0;
  std::string kind;
  std::map<std::string, std::string> fields;
  std::string text;  // free text, e.g. an exception's message; empty if none

  // The field's value, or `fallback` when absent.
  std::string get(const std::string& key, const std::string& fallback = "") const;
  // The field as a number; `fallback` when absent or not a number.
  std::int64_t number(const std::string& key, std::int64_t fallback = 0) const;
};

// Now by CLOCK_MONOTONIC, in nanoseconds.
std::int64_t monotonic_ns();

// The line for `event`, without the trailing newline.
std::string format_event(const Event& event);

// The event a line holds, or nothing for a line that is not one (a torn last
// line of a killed process, garbage).
std::optional<Event> parse_event(std::string_view line);

}  // namespace dlock::history
