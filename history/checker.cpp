#include "checker.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>
#include <vector>

namespace dlock::history {
namespace {

constexpr std::int64_t kNsPerMs = 1'000'000;
constexpr std::int64_t kContext = 3'000 * kNsPerMs;  // faults this long before a finding are shown with it

// A stamp as seconds since the record began: "+12.345s".
std::string at(const Record& record, std::int64_t t_ns) {
  char text[32];
  std::snprintf(text, sizeof text, "+%.3fs", static_cast<double>(t_ns - record.first_ns) / 1e9);
  return text;
}

std::string show_event(const Record& record, const Event& e) {
  std::string line = format_event(e);
  return at(record, e.t_ns) + line.substr(line.find(' '));
}

std::string show_fault(const Record& record, const Fault& f) {
  std::string line = at(record, f.from_ns) + " " + f.kind;
  if (!f.how.empty()) line += " (" + f.how + ")";
  if (!f.worker.empty()) line += " of " + f.worker + " pid " + std::to_string(f.pid);
  if (f.until_ns != f.from_ns) line += " until " + at(record, f.until_ns);
  return line;
}

std::string show_hold(const Record& record, const Hold& h) {
  return h.worker + " (pid " + std::to_string(h.pid) + ", " + (h.mode.empty() ? "?" : h.mode) + " lease, token " +
         std::to_string(h.token) + ", granted " + at(record, h.grant_ns) + ", ended " + at(record, h.end_ns) + " by " +
         h.end_how + ", released: " + h.released + ")";
}

// The hold's own events (its invoke to the last before its next call, with
// two more either side) and the driver's faults around it.
std::string context(const Record& record, const Hold& h) {
  std::string out = "    " + h.worker + " pid " + std::to_string(h.pid) + ":\n";
  const auto& stream = record.streams.at(h.worker);
  const std::size_t from = h.first_event >= 2 ? h.first_event - 2 : 0;
  const std::size_t to = std::min(stream.size(), h.last_event + 3);
  for (std::size_t i = from; i < to; ++i) out += "      " + show_event(record, stream[i]) + "\n";
  for (const Fault& f : record.faults) {
    if (f.until_ns >= h.invoke_ns - kContext && f.from_ns <= h.end_ns) out += "      fault " + show_fault(record, f) + "\n";
  }
  return out;
}

// Was `h` SIGSTOPped by the driver for longer than its lease while it was calling or holding?
bool stopped_past_lease(const Record& record, const Hold& h) {
  return std::any_of(record.faults.begin(), record.faults.end(), [&](const Fault& f) {
    return f.kind == "stop-holder" && f.worker == h.worker && f.pid == h.pid &&
           f.until_ns - f.from_ns > h.lease_ms * kNsPerMs && f.from_ns < h.end_ns && f.until_ns > h.invoke_ns;
  });
}

void check_overlaps(const Record& record, Report& report) {
  const auto& holds = record.holds;
  std::vector<std::size_t> active;  // holds not yet ended at the current grant
  std::set<std::size_t> late_writers;
  std::set<std::size_t> earlier_holders;
  for (std::size_t b = 0; b < holds.size(); ++b) {
    const Hold& later_granted = holds[b];
    std::erase_if(active, [&](std::size_t a) { return holds[a].end_ns <= later_granted.grant_ns; });
    for (std::size_t a : active) {
      if (holds[a].worker == later_granted.worker && holds[a].pid == later_granted.pid) continue;
      ++report.overlaps;
      // The earlier holder is the one Redis granted first: the smaller token.
      const bool a_first = holds[a].token <= later_granted.token;
      const Hold& earlier = a_first ? holds[a] : later_granted;
      const Hold& later = a_first ? later_granted : holds[a];
      earlier_holders.insert(a_first ? a : b);
      if (earlier.told_ns) {
        ++report.overlaps_excused_told;
      } else if (stopped_past_lease(record, earlier)) {
        ++report.overlaps_excused_stopped;
      } else {
        report.violations.push_back("unexcused overlap: " + show_hold(record, earlier) + " was granted first, and " +
                                    show_hold(record, later) + " was granted while it held; the earlier holder " +
                                    "was never told it lost the lock nor stopped past its lease\n" +
                                    context(record, earlier) + context(record, later));
        continue;
      }
      if (earlier.write == Write::Ok && earlier.write_ns > later.grant_ns) late_writers.insert(a_first ? a : b);
    }
    active.push_back(b);
  }
  report.late_writes = static_cast<int>(late_writers.size());
  report.overlapped_holds = static_cast<int>(earlier_holders.size());
}

void check_tokens(const Record& record, Report& report) {
  const auto& holds = record.holds;
  std::map<std::uint64_t, std::vector<std::size_t>> by_token;
  for (std::size_t i = 0; i < holds.size(); ++i) by_token[holds[i].token].push_back(i);
  for (const auto& [token, granted] : by_token) {
    if (granted.size() < 2) continue;
    ++report.token_repeats;
    ++report.repeats_by_release[holds[granted.front()].released];
    std::string text = "fencing token " + std::to_string(token) + " granted " + std::to_string(granted.size()) +
                       " times:";
    for (std::size_t i : granted) text += "\n  " + show_hold(record, holds[i]);
    text += "\n";
    for (std::size_t i : granted) text += context(record, holds[i]);
    report.violations.push_back(text);
  }
  // best[i]: the hold with the greatest token among the first i+1 grants.
  std::vector<std::size_t> best(holds.size());
  for (std::size_t i = 0; i < holds.size(); ++i) {
    best[i] = (i > 0 && holds[best[i - 1]].token >= holds[i].token) ? best[i - 1] : i;
  }
  for (const Hold& b : holds) {
    // Holds granted strictly before b was invoked: Redis ran their acquire before b's.
    auto first_not_before = std::lower_bound(holds.begin(), holds.end(), b.invoke_ns,
                                             [](const Hold& h, std::int64_t t) { return h.grant_ns < t; });
    if (first_not_before == holds.begin()) continue;
    const Hold& a = holds[best[static_cast<std::size_t>(first_not_before - holds.begin()) - 1]];
    if (a.token <= b.token) continue;  // equal tokens are reported as a repeat
    ++report.token_decreases;
    report.violations.push_back("fencing token went down: " + show_hold(record, a) + " was granted before " +
                                b.worker + " invoked lock() at " + at(record, b.invoke_ns) + ", which returned " +
                                show_hold(record, b) + "\n" + context(record, a) + context(record, b));
  }
}

void check_counter(const Record& record, Report& report) {
  for (const Hold& h : record.holds) {
    if (h.write == Write::Ok) ++report.sections_ok;
    if (h.write == Write::Unknown) ++report.sections_unknown;
  }
  report.final_counter = record.final_counter;
  if (!record.final_counter) return;  // reported as an incomplete record
  const long long final_value = *record.final_counter;
  const long long low = report.sections_ok;
  const long long high = low + report.sections_unknown;
  report.counter_ok = final_value >= low && final_value <= high;
  if (report.counter_ok || (final_value < low && report.late_writes > 0)) return;
  report.violations.push_back(
      "counter mismatch: final value " + std::to_string(final_value) + ", but " + std::to_string(low) +
      " sections were acknowledged and " + std::to_string(report.sections_unknown) +
      " more may have written, so it must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "]" +
      (final_value < low ? "; updates were lost with no late write of an excused overlap to explain them"
                         : "; more writes landed than any section made"));
}

void longest_free_wait(const Record& record, Report& report) {
  // +1/-1 steps of "holds" and "waiting calls"; the lock is free-while-waited-for where holds == 0 < waits.
  std::vector<std::tuple<std::int64_t, int, int>> steps;
  for (const Hold& h : record.holds) {
    steps.emplace_back(h.grant_ns, 1, 0);
    steps.emplace_back(h.end_ns, -1, 0);
  }
  for (const Wait& w : record.waits) {
    steps.emplace_back(w.from_ns, 0, 1);
    steps.emplace_back(w.until_ns, 0, -1);
  }
  std::sort(steps.begin(), steps.end());
  int holds = 0, waits = 0;
  std::int64_t stretch_from = -1, best_from = 0, best_to = 0;
  for (std::size_t i = 0; i < steps.size();) {
    const std::int64_t t = std::get<0>(steps[i]);
    for (; i < steps.size() && std::get<0>(steps[i]) == t; ++i) {
      holds += std::get<1>(steps[i]);
      waits += std::get<2>(steps[i]);
    }
    const bool free_and_wanted = holds == 0 && waits > 0;
    if (free_and_wanted && stretch_from < 0) stretch_from = t;
    if (!free_and_wanted && stretch_from >= 0) {
      if (t - stretch_from > best_to - best_from) best_from = stretch_from, best_to = t;
      stretch_from = -1;
    }
  }
  report.longest_free_wait_s = static_cast<double>(best_to - best_from) / 1e9;
  if (best_to == best_from) return;
  report.longest_free_wait_at = "from " + at(record, best_from) + " to " + at(record, best_to);
  std::string before;
  for (const Fault& f : record.faults) {
    if (f.until_ns >= best_from - kContext && f.from_ns <= best_to) before += (before.empty() ? "" : "; ") + show_fault(record, f);
  }
  report.longest_free_wait_at += before.empty() ? ", no fault nearby" : ", after: " + before;
}

void restart_notice(const Record& record, Report& report) {
  for (const Fault& f : record.faults) {
    if (f.kind != "restart-redis" || f.how != "forget") continue;
    ++report.forgetting_restarts;
    for (const Hold& h : record.holds) {
      if (h.grant_ns >= f.from_ns || h.end_ns <= f.until_ns) continue;  // not held from before the kill to the return
      if (h.told_ns && *h.told_ns < f.from_ns) continue;                  // lost before, for another reason
      if (!h.told_ns && h.released == "ok") continue;                      // released in Redis: not forgotten
      ++report.holds_through_forgetting;
      // Never told (its release failed too): it believed until its hold ended.
      const std::int64_t told_at = h.told_ns ? *h.told_ns : h.end_ns;
      const double seconds = static_cast<double>(std::max<std::int64_t>(0, told_at - f.until_ns)) / 1e9;
      if (!report.longest_restart_notice_at.empty() && seconds <= report.longest_restart_notice_s) continue;
      report.longest_restart_notice_s = seconds;
      const std::string how_told =
          !h.told_ns ? ", never told"
                     : ", told by " + h.told_via + (told_at <= h.end_ns ? " inside its section" : " after its section");
      report.longest_restart_notice_at = show_hold(record, h) + ", Redis back at " + at(record, f.until_ns) + how_told;
    }
  }
}

std::string counts(const std::map<std::string, int>& by_kind) {
  std::string out;
  for (const auto& [kind, n] : by_kind) out += (out.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

std::string counter_verdict(const Report& r) {
  if (r.counter_ok) return "ok";
  if (!r.final_counter) return "not checked";
  const bool explained = *r.final_counter < r.sections_ok && r.late_writes > 0;
  return explained ? "updates lost, explained by " + std::to_string(r.late_writes) + " late write(s) in excused overlaps"
                   : "MISMATCH";
}

}  // namespace

Report check_history(const Record& record) {
  Report report;
  report.workers = static_cast<int>(record.streams.size()) - (record.streams.count("driver") ? 1 : 0);
  report.incarnations = record.incarnations;
  report.seconds = static_cast<double>(record.last_ns - record.first_ns) / 1e9;
  report.grants = static_cast<int>(record.holds.size());
  report.failed_invokes = record.failed_invokes;
  report.skipped_faults = record.skipped_faults;
  report.problems = record.problems;
  for (const Fault& f : record.faults) {
    ++report.faults[f.kind];
    if (!f.how.empty()) ++report.faults[f.kind + "/" + f.how];
  }
  for (const Hold& h : record.holds) report.holds_told += h.told_ns ? 1 : 0;
  check_overlaps(record, report);
  check_tokens(record, report);
  check_counter(record, report);
  longest_free_wait(record, report);
  restart_notice(record, report);
  return report;
}

std::string format_report(const Report& r, bool details) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
  char free_wait[32];
  std::snprintf(free_wait, sizeof free_wait, "%.3f", r.longest_free_wait_s);
  std::string out;
  out += "record: " + std::string(seconds) + " s, " + std::to_string(r.workers) + " workers, " +
         std::to_string(r.incarnations) + " worker processes\n";
  out += "grants " + std::to_string(r.grants) + ", sections acknowledged " + std::to_string(r.sections_ok) +
         ", sections of unknown outcome " + std::to_string(r.sections_unknown) + ", holds told they lost " +
         std::to_string(r.holds_told) + "\n";
  out += "failed lock() calls: " + counts(r.failed_invokes) + "\n";
  out += "faults: " + counts(r.faults) + "; skipped (no holder): " + counts(r.skipped_faults) + "\n";
  out += "overlaps " + std::to_string(r.overlaps) + " (pairs of holds; " + std::to_string(r.overlapped_holds) +
         " distinct earlier holders): excused " + std::to_string(r.overlaps_excused()) +
         " (earlier holder told " + std::to_string(r.overlaps_excused_told) + ", stopped past its lease " +
         std::to_string(r.overlaps_excused_stopped) + "), unexcused " +
         std::to_string(r.overlaps - r.overlaps_excused()) + "\n";
  out += "fencing tokens: repeats " + std::to_string(r.token_repeats) +
         (r.token_repeats ? " (release of the token's first hold: " + counts(r.repeats_by_release) + ")" : "") +
         ", decreases " + std::to_string(r.token_decreases) + "\n";
  out += "counter: final " + (r.final_counter ? std::to_string(*r.final_counter) : std::string("unknown")) +
         ", acknowledged " + std::to_string(r.sections_ok) + " + up to " + std::to_string(r.sections_unknown) +
         " unknown: " + counter_verdict(r) + "\n";
  out += "longest the lock sat free while a lock() call waited: " + std::string(free_wait) + " s" +
         (r.longest_free_wait_at.empty() ? "" : " (" + r.longest_free_wait_at + ")") + "\n";
  char notice[32];
  std::snprintf(notice, sizeof notice, "%.3f", r.longest_restart_notice_s);
  out += "restarts that forgot the lock " + std::to_string(r.forgetting_restarts) + ", holds that lived through one " +
         std::to_string(r.holds_through_forgetting) + "; the longest such a holder believed it held after Redis " +
         "answered again: " + std::string(notice) + " s" +
         (r.longest_restart_notice_at.empty() ? "" : " (" + r.longest_restart_notice_at + ")") + "\n";
  for (const auto& problem : r.problems) out += "INCOMPLETE RECORD: " + problem + "\n";
  for (std::size_t i = 0; details && i < r.violations.size(); ++i) {
    out += "VIOLATION " + std::to_string(i + 1) + ": " + r.violations[i];
    if (out.back() != '\n') out += '\n';
  }
  out += "violations " + std::to_string(r.violations.size()) + "\n";
  out += r.passed() ? "RESULT: PASS\n"
                    : "RESULT: FAIL (" + std::to_string(r.violations.size()) + " violations, " +
                          std::to_string(r.problems.size()) + " record problems)\n";
  return out;
}

}  // namespace dlock::history
