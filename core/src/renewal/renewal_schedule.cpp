#include "renewal/renewal_schedule.hpp"

#include <algorithm>

namespace dlock::detail {

RenewalSchedule::Lane* RenewalSchedule::lane_for(Plan kind, std::int64_t lease_ms) noexcept {
  if (kind == Plan::other) return nullptr;
  const auto key = std::make_pair(kind, lease_ms);
  if (auto it = lanes_.find(key); it != lanes_.end()) return &it->second;
  if (lanes_.size() >= kMaxLanes) return nullptr;
  try {
    return &lanes_.try_emplace(key).first->second;
  } catch (...) {
    return nullptr;  // without memory for a lane, the ordered set serves (or says so itself)
  }
}

void RenewalSchedule::unlink(Task& task) noexcept {
  Lane& lane = *task.lane;
  (task.prev ? task.prev->next : lane.front) = task.next;
  (task.next ? task.next->prev : lane.back) = task.prev;
  task.lane = nullptr;
  task.prev = task.next = nullptr;
}

void RenewalSchedule::plan(Task& task, Clock::time_point due, Plan kind, std::int64_t lease_ms) {
  Lane* lane = lane_for(kind, lease_ms);
  // Its lane's back, not counting itself: the task may be the back now.
  const Task* back = lane ? (lane->back == &task ? task.prev : lane->back) : nullptr;
  if (lane && (back == nullptr || back->due <= due)) {
    remove(task);
    task.due = due;
    task.lane = lane;
    task.prev = lane->back;
    (lane->back ? lane->back->next : lane->front) = &task;
    lane->back = &task;
    task.planned = true;
    ++planned_;
    return;
  }
  if (task.planned && task.lane == nullptr) {  // already in the set: its node is reused
    auto node = ordered_.extract(task.in_set);
    node.value().first = due;
    task.in_set = ordered_.insert(std::move(node)).position;
    task.due = due;
    return;
  }
  // The new place first: if it cannot be had, the old one stays.
  const auto placed = ordered_.emplace(due, &task).first;
  remove(task);
  task.in_set = placed;
  task.due = due;
  task.planned = true;
  ++planned_;
}

void RenewalSchedule::remove(Task& task) noexcept {
  if (!task.planned) return;
  if (task.lane) {
    unlink(task);
  } else {
    ordered_.erase(task.in_set);
  }
  task.planned = false;
  --planned_;
}

Clock::time_point RenewalSchedule::first_due() const {
  Clock::time_point first = ordered_.empty() ? Clock::time_point::max() : ordered_.begin()->first;
  for (const auto& [key, lane] : lanes_) {
    if (lane.front) first = std::min(first, lane.front->due);
  }
  return first;
}

void RenewalSchedule::collect_due(Clock::time_point limit, std::vector<Task*>& out) const {
  for (auto it = ordered_.begin(); it != ordered_.end() && it->first <= limit; ++it) out.push_back(it->second);
  for (const auto& [key, lane] : lanes_) {
    for (Task* task = lane.front; task && task->due <= limit; task = task->next) out.push_back(task);
  }
}

}  // namespace dlock::detail
