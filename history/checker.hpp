#pragma once
// The history checker: proves from a record (record.hpp) that the lock kept
// its promises, or says precisely where it did not.
//
// What it checks, and what counts as a violation:
//
// 1. Overlaps. Two holds of different processes overlap when one was granted
//    while the other had not yet ended (holds as record.hpp defines them:
//    grant → end, so an overlap here is an overlap in Redis). Of the two, the
//    EARLIER holder is the one Redis granted first, as its smaller fencing
//    token shows (by grant stamp if the tokens are equal): it is the one
//    whose lock was gone when the other got it. The overlap is EXCUSED when
//    that earlier holder
//      (a) was told: its hold has a lost notice (the on_lost hook, lost()
//          true after the section, LockLostError from check() or unlock()),
//          at whatever time before its next lock() call; or
//      (b) was SIGSTOPped by the driver for longer than its lease, with the
//          stop window meeting its hold (from its invoke to its end): a
//          pause the lock cannot see coming, which only a fencing token can
//          defend against.
//    A holder killed by the driver needs no excuse: its hold ends at its
//    death, so it overlaps nothing granted later. Any other overlap is a
//    VIOLATION.
// 2. Fencing tokens. A token granted twice is a VIOLATION (repeat). A hold
//    granted before another was invoked (grant stamp < the other's invoke
//    stamp: Redis certainly ran the first acquire before the second) must
//    have the smaller token, else a VIOLATION (decrease). Holds whose calls
//    ran at the same time may have either order: the record cannot tell.
// 3. The counter. Each section reads the counter and writes it plus one, so
//    with OK sections acknowledged and UNKNOWN sections whose SET went out
//    unanswered (or whose process died after the GET), the final value must
//    lie in [OK, OK + UNKNOWN]. Above: a VIOLATION (writes nobody made).
//    Below: updates were lost, which is a VIOLATION unless some section
//    wrote late, i.e. its SET was acknowledged after the grant of a holder it
//    overlapped, in an excused overlap (a holder stopped past its lease
//    between its check and its SET: exactly what fencing is for).
// 4. The longest time the lock sat free (no hold) while some lock() call was
//    waiting, with the faults just before it: a figure, not a verdict.
// 5. The restart notice: of the holds that lived through a restart which
//    forgot the lock (restart-redis how=forget: granted before the kill,
//    still held when Redis answered again), the longest time from Redis
//    answering to the holder's lost notice (or, never told, to the end of its
//    hold): how long a holder went on believing in a lock Redis no longer
//    had. A figure, not a verdict (the overlaps say whether it did harm).
// An incomplete record (no driver events, no final counter, the driver
// aborted) fails the check too.

#include <map>
#include <string>
#include <vector>

#include "record.hpp"

namespace dlock::history {

struct Report {
  int workers = 0;
  int incarnations = 0;
  double seconds = 0;
  int grants = 0;
  int sections_ok = 0;
  int sections_unknown = 0;
  int holds_told = 0;
  std::map<std::string, int> failed_invokes;   // by error class
  std::map<std::string, int> faults;           // by kind; restart-redis also as restart-redis/term|kill
  std::map<std::string, int> skipped_faults;
  int overlaps = 0;             // pairs of holds; one holder stopped for a second overlaps dozens
  int overlapped_holds = 0;     // distinct earlier holders among them
  int overlaps_excused_told = 0;
  int overlaps_excused_stopped = 0;
  int token_repeats = 0;
  std::map<std::string, int> repeats_by_release;  // how the first hold of each repeated token was released
  int token_decreases = 0;
  std::optional<long long> final_counter;
  int late_writes = 0;
  bool counter_ok = false;
  double longest_free_wait_s = 0;
  std::string longest_free_wait_at;  // where, and the faults just before
  int forgetting_restarts = 0;       // restart-redis how=forget
  int holds_through_forgetting = 0;  // holds that lived through one
  double longest_restart_notice_s = 0;
  std::string longest_restart_notice_at;  // which hold, and how it was told
  std::vector<std::string> violations;  // one multi-line description each, with the events around it
  std::vector<std::string> problems;    // the record is incomplete

  bool passed() const { return violations.empty() && problems.empty(); }
  int overlaps_excused() const { return overlaps_excused_told + overlaps_excused_stopped; }
};

Report check_history(const Record& record);

// The figures and (with `details`) every violation with the events around
// it, for people; the last line is "RESULT: PASS" or "RESULT: FAIL (...)".
std::string format_report(const Report& report, bool details = true);

}  // namespace dlock::history
