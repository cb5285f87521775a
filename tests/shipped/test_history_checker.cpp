// The history checker proves itself: hand-made histories, each with one
// planted violation (an overlap nobody was told of, a fencing token granted
// twice or going down, a counter that does not add up), must each be caught;
// the excuses it allows must hold exactly; a clean history must pass.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "checker.hpp"
#include "event_log.hpp"

using dlock::history::Event;
using dlock::history::Report;

namespace {

constexpr std::int64_t kMs = 1'000'000;

// A history written by hand, with stamps in milliseconds.
struct History {
  std::vector<Event> events;

  void add(long long t_ms, const std::string& who, long pid, const std::string& kind,
           std::map<std::string, std::string> fields = {}, const std::string& text = "") {
    events.push_back({t_ms * kMs, who, pid, kind, std::move(fields), text});
  }
  // A worker process starts (1 s lease, watchdog-renewed).
  void start(long long t_ms, const std::string& who, long pid) {
    add(t_ms, "driver", 1, "worker-start", {{"worker", who}, {"pid", std::to_string(pid)}});
    add(t_ms, who, pid, "start", {{"mode", "watchdog"}, {"lease_ms", "1000"}});
  }
  // lock() called at `invoke`, granted at `grant` with `token`; the counter read as value-1
  // just after and `value` written just before `end`; released 1 ms after.
  void section(const std::string& who, long pid, long long invoke, long long grant, long long end,
               long long token, long long value) {
    add(invoke, who, pid, "invoke");
    add(grant, who, pid, "grant", {{"token", std::to_string(token)}});
    add(grant + 1, who, pid, "read", {{"value", std::to_string(value - 1)}});
    add(end, who, pid, "end", {{"write", "ok"}, {"value", std::to_string(value)}});
    add(end + 1, who, pid, "release", {{"outcome", "ok"}});
  }
  void finish(long long t_ms, long long counter) {
    add(t_ms, "driver", 1, "final", {{"counter", std::to_string(counter)}});
  }
  Report check() const { return dlock::history::check_history(dlock::history::build_record(events)); }
};

// Three workers taking turns, tokens 1..6, counter 6: nothing wrong.
History clean_history() {
  History h;
  h.add(0, "driver", 1, "config", {{"seed", "1"}, {"workers", "3"}, {"lease_ms", "1000"}});
  h.start(0, "w1", 101);
  h.start(0, "w2", 102);
  h.start(0, "w3", 103);
  h.section("w1", 101, 10, 10, 50, 1, 1);
  h.section("w2", 102, 20, 52, 90, 2, 2);
  h.section("w3", 103, 30, 92, 130, 3, 3);
  h.section("w1", 101, 60, 132, 170, 4, 4);
  h.section("w2", 102, 100, 172, 210, 5, 5);
  h.section("w3", 103, 140, 212, 250, 6, 6);
  return h;
}

// After the clean history, w1 holds token 7 from 300 to 400 and w2 is granted
// token 8 at 350, inside it; with `told_via`, w1 gets a lost notice at 380
// (late, after w2 got in, but told all the same).
History overlap(const std::string& told_via = "") {
  History h = clean_history();
  h.section("w1", 101, 300, 300, 400, 7, 7);
  if (!told_via.empty()) h.add(380, "w1", 101, "lost", {{"via", told_via}});
  h.section("w2", 102, 310, 350, 450, 8, 8);
  h.finish(500, 8);
  return h;
}

bool mentions(const Report& report, const std::string& words) {
  for (const auto& violation : report.violations) {
    if (violation.find(words) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a clean history passes", "[history]") {
  History h = clean_history();
  h.finish(300, 6);
  const Report report = h.check();
  INFO(dlock::history::format_report(report));
  CHECK(report.passed());
  CHECK(report.grants == 6);
  CHECK(report.sections_ok == 6);
  CHECK(report.overlaps == 0);
  CHECK(report.counter_ok);
  CHECK(dlock::history::format_report(report).find("RESULT: PASS") != std::string::npos);
}

TEST_CASE("an overlap whose earlier holder was never told is a violation", "[history]") {
  const Report report = overlap().check();
  INFO(dlock::history::format_report(report));
  CHECK_FALSE(report.passed());
  CHECK(report.overlaps == 1);
  CHECK(report.overlaps_excused() == 0);
  REQUIRE(report.violations.size() == 1);
  CHECK(mentions(report, "unexcused overlap: w1 (pid 101, watchdog lease, token 7"));
  CHECK(dlock::history::format_report(report).find("RESULT: FAIL") != std::string::npos);
}

TEST_CASE("an overlap is excused when the earlier holder was told it lost the lock", "[history]") {
  for (const std::string via : {"hook", "flag", "error"}) {
    const Report report = overlap(via).check();
    INFO(via << "\n" << dlock::history::format_report(report));
    CHECK(report.passed());
    CHECK(report.overlaps_excused_told == 1);
  }
}

TEST_CASE("a lost notice that comes before lock() returns belongs to the hold it returns", "[history]") {
  for (const bool granted : {true, false}) {
    History h = clean_history();
    h.add(300, "w1", 101, "invoke");
    h.add(349, "w1", 101, "lost", {{"via", "hook"}});  // e.g. granted after a Redis freeze, already expired
    if (granted) {
      h.add(350, "w1", 101, "grant", {{"token", "7"}});
      h.add(400, "w1", 101, "end", {{"write", "none"}, {"error", "ConnectionError"}});
      h.add(401, "w1", 101, "release", {{"outcome", "ok"}});
      h.section("w2", 102, 310, 360, 450, 8, 7);  // inside w1's hold: excused only by that notice
    } else {
      h.add(350, "w1", 101, "fail", {{"error", "ConnectionError"}});
      h.section("w2", 102, 310, 360, 450, 8, 7);
    }
    h.finish(500, 7);
    const Report report = h.check();
    INFO((granted ? "granted\n" : "failed\n") << dlock::history::format_report(report));
    CHECK(report.passed());
    CHECK(report.overlaps_excused_told == (granted ? 1 : 0));
    CHECK(report.holds_told == 1);  // the new hold's, or else the previous one's (a late notice)
  }
}

TEST_CASE("an overlap is excused when a LockLostError ended the earlier holder's release", "[history]") {
  History h = clean_history();
  h.add(300, "w1", 101, "invoke");
  h.add(300, "w1", 101, "grant", {{"token", "7"}});
  h.add(400, "w1", 101, "end", {{"write", "none"}, {"error", "ConnectionError"}});
  h.add(401, "w1", 101, "release", {{"outcome", "error"}, {"error", "LockLostError"}}, "lock 'history' was lost");
  h.section("w2", 102, 310, 350, 450, 8, 7);
  h.finish(500, 7);
  const Report report = h.check();
  INFO(dlock::history::format_report(report));
  CHECK(report.passed());
  CHECK(report.overlaps_excused_told == 1);
}

TEST_CASE("an overlap is excused by a SIGSTOP of the earlier holder longer than its lease and not by a shorter one", "[history]") {
  for (const long long stopped_ms : {1200LL, 800LL}) {
    History h = clean_history();
    // w1 (token 7) is stopped in its section; w2 gets the lock once the lease ran out; w1 then writes late.
    h.section("w1", 101, 300, 300, 1600, 7, 7);
    h.add(310, "driver", 1, "fault",
          {{"kind", "stop-holder"}, {"worker", "w1"}, {"pid", "101"}, {"until", std::to_string((310 + stopped_ms) * kMs)}});
    h.section("w2", 102, 320, 1320, 1400, 8, 7);  // read 6: w1 had not written yet
    h.finish(1700, 7);  // w1's late SET wrote 7 over w2's 7: one update lost
    const Report report = h.check();
    INFO("stopped " << stopped_ms << " ms\n" << dlock::history::format_report(report));
    if (stopped_ms > 1000) {
      CHECK(report.passed());
      CHECK(report.overlaps_excused_stopped == 1);
      CHECK(report.late_writes == 1);  // explains the lost update
    } else {
      CHECK_FALSE(report.passed());
      CHECK(mentions(report, "unexcused overlap"));
    }
  }
}

TEST_CASE("a holder killed by the driver overlaps nothing after its death", "[history]") {
  History h = clean_history();
  h.add(300, "w1", 101, "invoke");
  h.add(300, "w1", 101, "grant", {{"token", "7"}});
  h.add(301, "w1", 101, "read", {{"value", "6"}});
  h.add(320, "driver", 1, "fault", {{"kind", "kill-holder"}, {"worker", "w1"}, {"pid", "101"}});
  h.start(321, "w1", 104);
  h.section("w2", 102, 310, 1320, 1400, 8, 7);  // granted once the dead holder's lease ran out
  h.finish(1500, 7);                            // the dead holder's SET never went out
  const Report report = h.check();
  INFO(dlock::history::format_report(report));
  CHECK(report.passed());
  CHECK(report.overlaps == 0);
  CHECK(report.sections_unknown == 1);
  CHECK(report.faults.at("kill-holder") == 1);
  // w2 waited from 320 (the death) to 1320 with the lock held by nobody alive.
  CHECK(report.longest_free_wait_s == Approx(1.0).margin(0.001));
}

TEST_CASE("a fencing token granted twice is a violation", "[history]") {
  History h = clean_history();
  h.section("w1", 101, 300, 300, 340, 6, 7);  // token 6 again, as an adopted stale hold would return
  h.finish(400, 7);
  const Report report = h.check();
  INFO(dlock::history::format_report(report));
  CHECK_FALSE(report.passed());
  CHECK(report.token_repeats == 1);
  CHECK(report.token_decreases == 0);  // an equal token is a repeat, counted once
  REQUIRE(report.violations.size() == 1);
  CHECK(mentions(report, "fencing token 6 granted 2 times"));
  CHECK(report.repeats_by_release == std::map<std::string, int>{{"ok", 1}});  // w3 had released token 6
  CHECK(mentions(report, "w3 (pid 103"));  // both holders named
  CHECK(mentions(report, "w1 (pid 101"));
}

TEST_CASE("a fencing token lower than one granted before the call is a violation", "[history]") {
  History h = clean_history();
  h.section("w1", 101, 300, 300, 340, 9, 7);
  h.section("w2", 102, 345, 350, 390, 8, 8);  // invoked after token 9 was granted, yet got 8
  h.finish(400, 8);
  const Report report = h.check();
  INFO(dlock::history::format_report(report));
  CHECK_FALSE(report.passed());
  CHECK(report.token_decreases == 1);
  CHECK(mentions(report, "fencing token went down"));
}

TEST_CASE("tokens of calls that ran at the same time may come in either order", "[history]") {
  History h = clean_history();
  // w2 invoked at 290, before w1's grant at 300: Redis may have served w2 first (token 7)
  // though w2 recorded its grant later.
  h.section("w1", 101, 280, 300, 340, 8, 7);
  h.section("w2", 102, 290, 345, 390, 9, 8);
  h.finish(400, 8);
  CHECK(h.check().passed());
}

TEST_CASE("a counter that does not match the acknowledged sections is a violation", "[history]") {
  for (const long long counter : {5LL, 7LL}) {
    History h = clean_history();
    h.finish(300, counter);
    const Report report = h.check();
    INFO("final counter " << counter << "\n" << dlock::history::format_report(report));
    CHECK_FALSE(report.passed());
    CHECK_FALSE(report.counter_ok);
    REQUIRE(report.violations.size() == 1);
    CHECK(mentions(report, "counter mismatch: final value " + std::to_string(counter)));
  }
}

TEST_CASE("a section whose SET got no answer may or may not have written", "[history]") {
  for (const long long counter : {6LL, 7LL}) {
    History h = clean_history();
    h.add(300, "w1", 101, "invoke");
    h.add(300, "w1", 101, "grant", {{"token", "7"}});
    h.add(301, "w1", 101, "read", {{"value", "6"}});
    h.add(340, "w1", 101, "end", {{"write", "unknown"}, {"error", "ConnectionError"}}, "connection lost\nwhile SET");
    h.add(341, "w1", 101, "release", {{"outcome", "ok"}});
    h.finish(400, counter);
    const Report report = h.check();
    INFO(dlock::history::format_report(report));
    CHECK(report.passed());
    CHECK(report.sections_unknown == 1);
  }
}

TEST_CASE("the restart notice: how long a holder lived on past a restart that forgot its lock before it was told",
          "[history]") {
  History h = clean_history();
  // A restart that kept the lock (AOF): w3 holds through it, and is no part of the figure.
  h.section("w3", 103, 260, 260, 330, 7, 7);
  h.add(280, "driver", 1, "fault", {{"kind", "restart-redis"}, {"how", "kill"}});
  h.add(300, "driver", 1, "redis-up", {{"pid", "2"}});
  // A restart that forgot it at 400 (back at 420): w1, granted at 390, is told by its hook at 470, 50 ms
  // after Redis answered, and its check() refuses the SET; w2 gets the lock at 440.
  h.add(385, "w1", 101, "invoke");
  h.add(390, "w1", 101, "grant", {{"token", "8"}});
  h.add(391, "w1", 101, "read", {{"value", "7"}});
  h.add(400, "driver", 1, "fault", {{"kind", "restart-redis"}, {"how", "forget"}});
  h.add(420, "driver", 1, "redis-up", {{"pid", "3"}});
  h.add(470, "w1", 101, "lost", {{"via", "hook"}});
  h.add(470, "w1", 101, "end", {{"write", "none"}, {"error", "LockLostError"}});
  h.add(471, "w1", 101, "release", {{"outcome", "error"}, {"error", "LockLostError"}});
  h.section("w2", 102, 430, 440, 480, 9, 8);
  h.finish(600, 8);
  const Report report = h.check();
  const std::string text = dlock::history::format_report(report);
  INFO(text);
  CHECK(report.passed());
  CHECK(report.forgetting_restarts == 1);
  CHECK(report.holds_through_forgetting == 1);
  CHECK(report.longest_restart_notice_s == Approx(0.050));
  CHECK(report.longest_restart_notice_at.find("w1 (pid 101") == 0);
  CHECK(report.longest_restart_notice_at.find("told by hook inside its section") != std::string::npos);
  CHECK(text.find("holds that lived through one 1; the longest such a holder believed it held after Redis answered "
                  "again: 0.050 s") != std::string::npos);
}

TEST_CASE("a record without the driver's final counter fails as incomplete", "[history]") {
  const Report report = clean_history().check();
  CHECK_FALSE(report.passed());
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("no final counter") != std::string::npos);
}

TEST_CASE("a record written to files reads back as the same history", "[history]") {
  char pattern[] = "/tmp/dlock-history-test-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::filesystem::path dir = pattern;
  {
    dlock::history::EventLog driver(dir / "driver.log", "driver");
    dlock::history::EventLog worker(dir / "w1.log", "w1");
    driver.append("config", {{"lease_ms", "1000"}});
    worker.append("start", {{"mode", "fixed"}, {"lease_ms", "1000"}});
    worker.append("invoke");
    worker.append("grant", {{"token", "41"}});
    worker.append("read", {{"value", "0"}});
    worker.append("end", {{"write", "ok"}, {"value", "1"}});
    worker.append("release", {{"outcome", "error"}, {"error", "LockLostError"}}, "lost\\ it\nreally");
    driver.append("final", {{"counter", "1"}});
  }
  const auto events = dlock::history::read_events(dir / "w1.log");
  REQUIRE(events.size() == 6);
  CHECK(events[5].text == "lost\\ it\nreally");  // escaped on the line, whole again when read
  CHECK(events[5].get("error") == "LockLostError");
  CHECK(events[1].t_ns >= events[0].t_ns);
  CHECK(dlock::history::last_events(dir / "w1.log", 2).back().kind == "release");

  const Report report = dlock::history::check_history(dlock::history::load_record(dir));
  INFO(dlock::history::format_report(report));
  CHECK(report.passed());
  CHECK(report.grants == 1);
  CHECK(report.holds_told == 1);
  CHECK(report.final_counter == 1);
  std::filesystem::remove_all(dir);
}
