// The watchdog's threads: a scheduler that plans each held lock's renewal and gives its
// verdict on time, and a renewer that sends due renewals pipelined, and the keep-alive beat.
#include "dlock/detail/watchdog.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "dlock/detail/key_label.hpp"
#include "dlock/errors.hpp"
#include "renewal/watchdog_state.hpp"

namespace dlock::detail {

// Renews `batch` in one pipeline, giving up at `deadline`. Returns, per lock,
// whether it was renewed (validity extended), found gone (appended to
// `lost`) or not told (left to be tried again).
std::vector<bool> Watchdog::State::renew(const std::vector<std::shared_ptr<HeldLock>>& batch,
                                         Clock::time_point deadline, LostList& lost) {
  std::vector<bool> renewed(batch.size(), false);
  // A script call per kLocksPerCall locks of one script group (a cluster's
  // hash slot: one call's keys must share it): the server's fixed cost per
  // call is spread, and no call blocks Redis for long. where[i]: lock i's
  // call and its place in that call's reply.
  // Views of the locks' own strings (`batch` keeps them alive), not copies: a million held
  // locks are 100,000 renewals a second. Each lease's digits are kept in `leases`, reserved
  // whole so that no view into it moves.
  std::vector<ScriptCall> calls;
  std::vector<std::string> leases;
  leases.reserve(batch.size());
  std::vector<std::pair<std::size_t, std::size_t>> where(batch.size());
  std::map<std::uint32_t, std::size_t> open_call;  // group → its call still filling
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto [it, fresh] = open_call.try_emplace(scripts->group_of(batch[i]->lock_name), calls.size());
    if (fresh || calls[it->second].keys.size() == kLocksPerCall) {
      it->second = calls.size();
      // Not reserved: in a cluster a batch spreads over many slots, a call each, most of them short.
      calls.emplace_back();
    }
    auto& call = calls[it->second];
    where[i] = {it->second, call.keys.size()};
    call.keys.push_back(batch[i]->lock_name);
    call.args.push_back(batch[i]->owner);
    leases.push_back(std::to_string(batch[i]->lease_ms.load()));
    call.args.push_back(leases.back());
  }
  const Clock::time_point sent = Clock::now();
  stats->renewals_sent.fetch_add(batch.size(), std::memory_order_relaxed);
  stats->renewal_rounds.fetch_add(1, std::memory_order_relaxed);
  std::vector<RedisReply> replies;
  try {
    replies = scripts->run_pipelined(kRenewManyScript, calls, deadline);
  } catch (const Error& e) {
    stats->renewals_failed.fetch_add(batch.size(), std::memory_order_relaxed);
    logger->warn("watchdog: renewing {} lock(s) failed, retrying until their leases run out: {}", batch.size(),
                 e.what());
    return renewed;
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto [at, place] = where[i];
    const RedisReply* call = at < replies.size() ? &replies[at] : nullptr;
    const RedisReply* reply =
        call && call->type == RedisReply::Type::Array && place < call->elements.size() ? &call->elements[place]
                                                                                        : nullptr;
    if (reply && reply->type == RedisReply::Type::Integer && reply->integer == 1) {
      batch[i]->extend_validity(sent, Millis(batch[i]->lease_ms.load()));
      renewed[i] = true;
    } else if (reply && reply->type == RedisReply::Type::Integer && reply->integer == 0) {
      lost.emplace_back(batch[i],
                        "its key is gone from Redis or belongs to another owner (expired, deleted or overwritten)");
    } else {
      // Not a verdict on the lock: retried next round, lost only when its validity runs out.
      const bool unacknowledged = call && call->is_error() && call->str.starts_with(kNotAcknowledgedError);
      logger->warn("watchdog: {} renewing {}: {}", unacknowledged ? "no replica acknowledgement" : "unexpected reply",
                   batch[i]->label(), call ? call->str : std::string("none"));
    }
  }
  return renewed;
}

Watchdog::Watchdog(RedisExecutor& redis, ScriptRunner& scripts, StatsRecorder& stats,
                   std::shared_ptr<spdlog::logger> logger)
    : state_(std::make_shared<State>()) {
  state_->redis = &redis;
  state_->scripts = &scripts;
  state_->stats = &stats;
  state_->logger = std::move(logger);
}

void Watchdog::set_lost_handler(LostHandler on_lost) {
  std::lock_guard guard(state_->mutex);
  state_->on_lost = std::move(on_lost);
}

void Watchdog::keep_alive(Millis period, std::function<void(Clock::time_point deadline)> beat) {
  std::lock_guard guard(state_->mutex);
  state_->beat = std::move(beat);
  state_->beat_period = period;
  state_->beat_due = Clock::now() + period;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  Subscription resets;
  {
    std::lock_guard guard(state_->mutex);
    state_->stopping = true;
    resets = std::move(state_->resets);
  }
  // Without the mutex: a notice in progress takes it, and is waited out here.
  resets.reset();
  state_->wake.notify_all();
  state_->batch_ready.notify_all();
  // Destroyed from a lost handler on one of its own threads: that one exits by itself.
  for (std::thread* thread : {&thread_, &renewer_}) {
    if (!thread->joinable()) continue;
    if (thread->get_id() == std::this_thread::get_id()) {
      thread->detach();
    } else {
      thread->join();
    }
  }
}

void Watchdog::watch(const std::shared_ptr<HeldLock>& lock, Clock::time_point granted) {
  // A lock handed to the watchdog by a re-entry may have less validity left
  // than a period (a fixed lease, not extended by an unacknowledged re-entry
  // under lock.replica_acks): its first renewal must come before it ends.
  const bool renews = lock->renewed.load();
  const Clock::time_point verdict = verdict_time(*lock);
  const Clock::time_point renewal = granted + renewal_period(*lock);
  const Clock::time_point latest_renewal = verdict - renewal_period(*lock);
  Clock::time_point due = verdict;
  State::Plan kind = State::Plan::verdict;
  if (renews) {
    due = std::min(renewal, latest_renewal);
    kind = renewal <= latest_renewal ? State::Plan::renewal : State::Plan::other;
  }
  bool earliest = false;
  {
    std::lock_guard guard(state_->mutex);
    if (state_->stopping) return;
    state_->plan_locked(lock, due, kind);
    earliest = due < state_->sleeping_until;
    if (!thread_.joinable()) {
      thread_ = std::thread(&Watchdog::run, state_);
      renewer_ = std::thread(&Watchdog::renew_batches, state_);
      State::follow_resets(state_);
    }
  }
  // Waking the thread costs a context switch on every lock(); it is only
  // needed when this task is due before the thread wakes by itself.
  if (earliest) state_->wake.notify_one();
}

void Watchdog::unwatch(const HeldLock& lock) {
  std::lock_guard guard(state_->mutex);
  state_->forget_locked(&lock);
}

std::size_t Watchdog::watched_count() const {
  std::lock_guard guard(state_->mutex);
  return state_->watched.size();
}

void Watchdog::run(const std::shared_ptr<State>& state) {
  std::unique_lock guard(state->mutex);
  // Sleeps until `until` (forever for max), or until woken.
  const auto nap_until = [&](Clock::time_point until) {
    state->sleeping_until = until;
    if (until == Clock::time_point::max()) {
      state->wake.wait(guard);
    } else {
      state->wake.wait_until(guard, until);
    }
  };
  while (!state->stopping) {
    state->renew_all_now(guard);
    state->hand_beat_if_due(Clock::now());
    if (state->schedule.empty()) {
      // Nothing to do. If a task was due later (its lock has been released
      // since), wake then anyway: a lock() that plans a task due after that
      // need not wake this thread, so a loop of lock+unlock wakes it once
      // per renewal period instead of on every lock().
      const bool later_task = Clock::now() < state->latest_due;
      nap_until(later_task ? std::min(state->latest_due, state->beat_due) : state->beat_due);
      continue;
    }
    const Clock::time_point first = state->schedule.first_due();
    if (Clock::now() < first) {
      // A task whose lock was released since stays due here: one spurious
      // wake-up is cheaper than waking this thread on every lock().
      nap_until(std::min(first, state->beat_due));
      continue;
    }
    state->sleeping_until = Clock::time_point::min();  // working: it re-reads the schedule before sleeping
    // Take every task due now or within the batch window. This thread never
    // waits for Redis: it gives verdicts on time and hands renewals to the renewer.
    const Clock::time_point now = Clock::now();
    LostList lost;
    std::vector<std::shared_ptr<HeldLock>> batch;
    // Taken first: a task re-planned below may fall due within the window
    // again. Each entry stays valid until its own lock is forgotten.
    std::vector<RenewalSchedule::Task*> due;
    state->schedule.collect_due(now + kBatchWindow, due);
    for (RenewalSchedule::Task* task : due) {
      auto* entry = static_cast<State::Watched*>(task);
      const std::shared_ptr<HeldLock> lock = entry->lock;  // a copy: forgetting the lock destroys its entry
      if (lock->lost_flag.load()) {
        lost.emplace_back(lock, "");  // already reported by whoever set the flag
        state->forget_locked(lock.get());
      } else if (now >= verdict_time(*lock)) {
        lost.emplace_back(lock, lock->renewed.load() ? "no renewal succeeded before its lease ran out by the local clock"
                                                     : "its fixed lease ran out while it was still held");
        state->forget_locked(lock.get());
      } else if (lock->renewed.load() && !entry->in_flight) {
        batch.push_back(lock);
        entry->in_flight = true;
        state->replan_locked(*entry, verdict_time(*lock), State::Plan::verdict);  // the renewer plans it sooner once back
      } else {
        // A fixed lease, or a renewal still on its way: look again at its verdict.
        state->replan_locked(*entry, verdict_time(*lock), State::Plan::verdict);
      }
    }
    if (!batch.empty()) {
      state->batches.push_back(std::move(batch));
      state->batch_ready.notify_one();
    }
    // forget_locked() already ran for these; report() only needs the handler.
    LostList to_report;
    for (auto& [lock, why] : lost) {
      if (!why.empty()) to_report.emplace_back(lock, std::move(why));
    }
    if (to_report.empty()) continue;
    guard.unlock();
    for (const auto& [lock, why] : to_report) {
      if (state->on_lost) state->on_lost(lock, why);
    }
    guard.lock();
  }
}

void Watchdog::renew_batches(const std::shared_ptr<State>& state) {
  std::unique_lock guard(state->mutex);
  for (;;) {
    state->batch_ready.wait(guard,
                            [&] { return state->stopping || !state->batches.empty() || state->beat_pending; });
    if (state->stopping) return;
    if (state->batches.empty()) {  // only the keep-alive beat: renewals, when there are any, go first
      state->beat_pending = false;
      const Clock::time_point deadline = Clock::now() + state->beat_io_limit();
      guard.unlock();
      state->beat(deadline);
      guard.lock();
      continue;
    }
    std::vector<std::shared_ptr<HeldLock>> batch = std::move(state->batches.front());
    state->batches.pop_front();
    // Rounds that fell due while the last one was on the wire go out as one:
    // a round trip each (and with lock.replica_acks a WAIT each, a
    // replication round trip) would fall further behind with every round.
    for (; !state->batches.empty(); state->batches.pop_front()) {
      auto& more = state->batches.front();
      batch.insert(batch.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    // The I/O gives up before the first verdict among these locks: a reply
    // after it could not save that one, and the others are tried again.
    Clock::time_point deadline = Clock::time_point::max();
    for (const auto& lock : batch) deadline = std::min(deadline, verdict_time(*lock) - io_margin(*lock));
    guard.unlock();

    LostList lost;
    const std::vector<bool> renewed = state->renew(batch, deadline, lost);

    guard.lock();
    const Clock::time_point now = Clock::now();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::shared_ptr<HeldLock>& lock = batch[i];
      const auto entry = state->watched.find(lock.get());
      if (entry == state->watched.end()) continue;  // released, or given its verdict, meanwhile
      entry->second.in_flight = false;
      // Sent before a reset was noticed, its answer may predate the master's return: once more, now.
      const bool again = !state->renew_again.empty() && state->renew_again.erase(lock.get()) > 0;
      const Millis after = again ? Millis(0) : renewed[i] ? renewal_period(*lock) : retry_delay(*lock);
      const State::Plan kind = again ? State::Plan::other : renewed[i] ? State::Plan::renewal : State::Plan::retry;
      if (now + after < verdict_time(*lock)) {
        state->replan_locked(entry->second, now + after, kind);
      } else {
        state->replan_locked(entry->second, verdict_time(*lock), State::Plan::verdict);
      }
    }
    state->report(guard, lost);
    state->wake.notify_one();  // the scheduler may sleep past a task just planned
  }
}

}  // namespace dlock::detail
