// The watchdog's schedule (core/src/renewal/renewal_schedule.hpp): whatever order
// plans come in, and whichever lane or the ordered set holds them, the earliest
// task and the tasks due by a time are exactly those a plain ordered map gives.
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "renewal/renewal_schedule.hpp"

using dlock::detail::Clock;
using dlock::detail::RenewalSchedule;
using Plan = RenewalSchedule::Plan;

namespace {

Clock::time_point at(int ms) { return Clock::time_point(std::chrono::milliseconds(ms)); }

std::vector<RenewalSchedule::Task*> due_by(const RenewalSchedule& schedule, int ms) {
  std::vector<RenewalSchedule::Task*> out;
  schedule.collect_due(at(ms), out);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the schedule's earliest task is the earliest of its lanes and its ordered set") {
  RenewalSchedule schedule;
  std::vector<RenewalSchedule::Task> tasks(4);
  CHECK(schedule.empty());
  CHECK(schedule.first_due() == Clock::time_point::max());

  schedule.plan(tasks[0], at(100), Plan::renewal, 30000);
  schedule.plan(tasks[1], at(200), Plan::renewal, 30000);
  schedule.plan(tasks[2], at(50), Plan::renewal, 30000);  // before its lane's back: the ordered set
  schedule.plan(tasks[3], at(70), Plan::verdict, 30000);
  CHECK_FALSE(schedule.empty());
  CHECK(schedule.first_due() == at(50));
  CHECK(due_by(schedule, 99) == std::vector<RenewalSchedule::Task*>{std::min(&tasks[2], &tasks[3]),
                                                                     std::max(&tasks[2], &tasks[3])});

  schedule.remove(tasks[2]);
  CHECK(schedule.first_due() == at(70));
  schedule.plan(tasks[3], at(300), Plan::verdict, 30000);  // re-planned later: still one task
  CHECK(schedule.first_due() == at(100));
  CHECK(due_by(schedule, 1000).size() == 3);
  schedule.plan(tasks[1], at(10), Plan::other, 0);  // from its lane to the set
  CHECK(schedule.first_due() == at(10));
  for (auto& task : tasks) schedule.remove(task);
  schedule.remove(tasks[0]);  // twice: nothing
  CHECK(schedule.empty());
  CHECK(schedule.first_due() == Clock::time_point::max());
  CHECK(due_by(schedule, 1000).empty());
}

TEST_CASE("the schedule agrees with an ordered map over random plans, re-plans and removals") {
  std::mt19937 random(GENERATE(1u, 2u, 3u, 4u));
  RenewalSchedule schedule;
  std::vector<RenewalSchedule::Task> tasks(200);
  std::map<RenewalSchedule::Task*, int> reference;  // task -> due (ms)
  const Plan kinds[] = {Plan::renewal, Plan::retry, Plan::verdict, Plan::other};
  int now = 0;
  for (int step = 0; step < 20000; ++step) {
    now += static_cast<int>(random() % 3);
    RenewalSchedule::Task& task = tasks[random() % tasks.size()];
    if (random() % 5 == 0) {
      schedule.remove(task);
      reference.erase(&task);
    } else {
      // Mostly "now + a lease's period" (lanes' order), sometimes earlier or anything;
      // more leases than there are lanes, so some kinds go to the set.
      const int lease = 30 + static_cast<int>(random() % 20);
      const int due = random() % 4 == 0 ? static_cast<int>(random() % 1000) : now + lease / 3;
      schedule.plan(task, at(due), kinds[random() % 4], lease);
      reference[&task] = due;
    }
    REQUIRE(schedule.empty() == reference.empty());
    int first = reference.empty() ? -1 : std::min_element(reference.begin(), reference.end(), [](auto& a, auto& b) {
                                           return a.second < b.second;
                                         })->second;
    REQUIRE(schedule.first_due() == (first < 0 ? Clock::time_point::max() : at(first)));
    if (step % 97 == 0) {
      const int limit = now + static_cast<int>(random() % 40);
      std::vector<RenewalSchedule::Task*> expected;
      for (const auto& [t, due] : reference) {
        if (due <= limit) expected.push_back(t);
      }
      REQUIRE(due_by(schedule, limit) == expected);
    }
  }
}
