// history_check DIR...: judges the records the history driver left in each
// DIR (checker.hpp says what is checked and what is excused), prints each
// report and, for several, the totals.
// Exit 0 when every record passes; 1 on any violation or incomplete record;
// 2 when a record cannot be read.
#include <iostream>

#include "checker.hpp"

namespace {

void add_counts(std::map<std::string, int>& total, const std::map<std::string, int>& one) {
  for (const auto& [kind, n] : one) total[kind] += n;
}

void add(dlock::history::Report& total, const dlock::history::Report& one) {
  total.workers = std::max(total.workers, one.workers);
  total.incarnations += one.incarnations;
  total.seconds += one.seconds;
  total.grants += one.grants;
  total.sections_ok += one.sections_ok;
  total.sections_unknown += one.sections_unknown;
  total.holds_told += one.holds_told;
  add_counts(total.failed_invokes, one.failed_invokes);
  add_counts(total.faults, one.faults);
  add_counts(total.skipped_faults, one.skipped_faults);
  total.overlaps += one.overlaps;
  total.overlapped_holds += one.overlapped_holds;
  total.overlaps_excused_told += one.overlaps_excused_told;
  total.overlaps_excused_stopped += one.overlaps_excused_stopped;
  total.token_repeats += one.token_repeats;
  add_counts(total.repeats_by_release, one.repeats_by_release);
  total.token_decreases += one.token_decreases;
  total.final_counter = total.final_counter.value_or(0) + one.final_counter.value_or(0);
  total.counter_ok = total.counter_ok && one.counter_ok;
  total.late_writes += one.late_writes;
  if (one.longest_free_wait_s > total.longest_free_wait_s) {
    total.longest_free_wait_s = one.longest_free_wait_s;
    total.longest_free_wait_at = one.longest_free_wait_at;
  }
  total.forgetting_restarts += one.forgetting_restarts;
  total.holds_through_forgetting += one.holds_through_forgetting;
  if (!one.longest_restart_notice_at.empty() &&
      (total.longest_restart_notice_at.empty() || one.longest_restart_notice_s > total.longest_restart_notice_s)) {
    total.longest_restart_notice_s = one.longest_restart_notice_s;
    total.longest_restart_notice_at = one.longest_restart_notice_at;
  }
  total.violations.insert(total.violations.end(), one.violations.begin(), one.violations.end());
  total.problems.insert(total.problems.end(), one.problems.begin(), one.problems.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: history_check DIR...   (each DIR a record of history_driver)\n";
    return argc < 2 ? 64 : 0;
  }
  dlock::history::Report total;
  total.counter_ok = true;
  for (int i = 1; i < argc; ++i) {
    try {
      const auto report = dlock::history::check_history(dlock::history::load_record(argv[i]));
      std::cout << "== " << argv[i] << "\n" << dlock::history::format_report(report) << "\n";
      add(total, report);
    } catch (const std::exception& e) {
      std::cerr << "history_check: " << argv[i] << ": " << e.what() << "\n";
      return 2;
    }
  }
  if (argc > 2) {
    std::cout << "== all " << argc - 1 << " records\n" << dlock::history::format_report(total, false);  // details were printed above
  }
  return total.passed() ? 0 : 1;
}
