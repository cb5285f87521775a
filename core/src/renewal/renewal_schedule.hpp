#pragma once
// When each watched lock falls due: the watchdog's schedule (watchdog_state.hpp).
//
// A million held locks are 100,000 renewals a second, each planned twice (its
// verdict as it goes out, its next renewal once back). An ordered tree of
// every task made those plans a fifth of the watchdog's time: a search down
// twenty levels, a cache miss each. Most plans fall after every other plan of
// their kind, though: "a period from now" for a lease, or "this lease's
// verdict", planned in the order the locks went out. So a task of such a kind
// joins the back of a lane kept for that kind and lease, in constant time, and
// the earliest task is among the lanes' fronts. A task that would fall before
// its lane's back (a lock granted on a slower thread, a reset's "now") goes to
// an ordered set instead: the order is always right, only its cost varies.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace dlock::detail {

using Clock = std::chrono::steady_clock;  // as held_lock.hpp

class RenewalSchedule {
 public:
  // What a plan is, which chooses its lane: plans of one kind and lease come in time order.
  enum class Plan : std::uint8_t { renewal, retry, verdict, other };

  struct Lane;
  // One watched lock's place; the watchdog's entry derives from it. Not copyable
  // while planned: the schedule points at it.
  struct Task {
    Task() = default;
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;

    Clock::time_point due{};
    Lane* lane = nullptr;  // its lane, or none: in the ordered set (or unplanned)
    Task* prev = nullptr;  // within its lane
    Task* next = nullptr;
    std::set<std::pair<Clock::time_point, Task*>>::iterator in_set{};
    bool planned = false;
  };
  struct Lane {
    Task* front = nullptr;
    Task* back = nullptr;
  };

  // Plans (or re-plans) `task` at `due`. If it throws (memory), `task` keeps the plan it had.
  void plan(Task& task, Clock::time_point due, Plan kind, std::int64_t lease_ms);
  // Takes `task` out of the schedule; nothing if it is not planned.
  void remove(Task& task) noexcept;

  bool empty() const { return planned_ == 0; }
  // The earliest task's time; max when empty.
  Clock::time_point first_due() const;
  // Every task due at or before `limit`, in no particular order; they stay planned.
  void collect_due(Clock::time_point limit, std::vector<Task*>& out) const;

 private:
  // Lanes are kept for the first few kinds and leases seen (a service uses a few
  // leases); past that, tasks go to the ordered set.
  static constexpr std::size_t kMaxLanes = 16;

  Lane* lane_for(Plan kind, std::int64_t lease_ms) noexcept;
  void unlink(Task& task) noexcept;

  std::map<std::pair<Plan, std::int64_t>, Lane> lanes_;
  std::set<std::pair<Clock::time_point, Task*>> ordered_;
  std::size_t planned_ = 0;
};

}  // namespace dlock::detail
