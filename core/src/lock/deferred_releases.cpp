// The releases nobody waits for: a thread that sweeps them every tick,
// reads each reply that came or whose command timeout passed, sends again
// those Redis answered with a passing state, and settles them one at a time;
// the claim by the next acquisition of the same lock; the drain at the end.
#include "dlock/detail/deferred_releases.hpp"

#include <cstdint>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// How often the thread looks at the releases in flight: a release nobody
// claims is settled (its loss reported, its count, its failure logged) within
// a tick of its reply. Releases that hand the lock to a waiter of this
// process are not left here: they are awaited by the releasing thread.
constexpr std::chrono::microseconds kTick{1000};
// How long the thread keeps sweeping after the last release went, before it sleeps until the next.
constexpr std::chrono::milliseconds kLinger{200};

// The reply, or none when it never came (timed out, connection lost). Its connection goes back to the pool.
std::optional<RedisReply> read_reply(DeferredReleases::Release& release) {
  std::optional<RedisReply> reply;
  try {
    reply = release.pending->get();
  } catch (const ConnectionError&) {
  }
  release.pending.reset();
  return reply;
}

}  // namespace

DeferredReleases::DeferredReleases(Settle settle, SendAgain send_again)
    : fork_generation_(fork_generation()), shared_(std::make_shared<Shared>()) {
  shared_->settle = std::move(settle);
  shared_->send_again = std::move(send_again);
}

DeferredReleases::~DeferredReleases() {
  if (fork_generation() != fork_generation_) {
    // A fork child: the releases, their connections and the thread are the
    // parent's (the mutex may even have been held at the fork); reading,
    // closing or joining them here would take the parent's replies or wait
    // for a thread that does not exist. Left to the process's exit.
    (void)new std::shared_ptr<Shared>(shared_);
    if (thread_.joinable()) (void)new std::thread(std::move(thread_));
    return;
  }
  drain();
}

std::unique_ptr<DeferredReleases::Release> DeferredReleases::add(std::unique_ptr<Release> release) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return release;
    // One release per name whose reply is to come (claim() follows it); one to be sent again has nothing on
    // a connection to follow, and keep() finds it a name of its own if need be.
    std::unique_ptr<Release> waiting;  // one of the same name waiting to be sent again: it moves aside
    if (release->pending) {
      auto same = shared_->pending.find(release->lock_name);
      if (same != shared_->pending.end() && same->second->pending) return release;
      if (same != shared_->pending.end()) {
        waiting = std::move(same->second);
        shared_->pending.erase(same);
      }
    }
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread(&DeferredReleases::run, shared_);
      } catch (const std::system_error&) {
        if (waiting) keep(*shared_, std::move(waiting));
        return release;  // no thread to read it: the caller does
      }
      shared_->thread_id = thread_.get_id();
    }
    // Its exact name first: what is kept below (keep()) moves aside for it.
    if (release->pending) {
      std::string name = release->lock_name;
      shared_->pending.emplace(std::move(name), std::move(release));
    } else {
      keep(*shared_, std::move(release));
    }
    if (waiting) keep(*shared_, std::move(waiting));
    // The replies that came meanwhile are read now, not at the next sweep: their connections go back to
    // the pool at once (a thread releasing many keys would otherwise wait for one).
    std::vector<std::unique_ptr<Release>> due = collect(*shared_, Clock::now());
    for (std::unique_ptr<Release>& again : due) keep(*shared_, std::move(again));  // the sweep's to send
    if (!shared_->asleep) return nullptr;
  }
  shared_->added.notify_one();
  return nullptr;
}

namespace {

// One waiting to be sent again is left to the thread: nothing of it is on a connection to follow.
// Nor one whose time is up: its reply will not come, and an acquisition sent after it would fail too.
bool claimable(const DeferredReleases::Release& release, Clock::time_point now) {
  return release.pending && now < release.pending->due();
}

}  // namespace

std::unique_ptr<DeferredReleases::Release> DeferredReleases::claim(std::string_view lock_name) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->pending.empty()) return nullptr;
  auto it = shared_->pending.find(lock_name);
  if (it == shared_->pending.end() || !claimable(*it->second, Clock::now())) return nullptr;
  std::unique_ptr<Release> release = std::move(it->second);
  shared_->pending.erase(it);
  return release;
}

std::vector<std::unique_ptr<DeferredReleases::Release>> DeferredReleases::claim_all(std::string_view prefix) {
  std::vector<std::unique_ptr<Release>> claimed;
  std::lock_guard lock(shared_->mutex);
  if (shared_->pending.empty()) return claimed;
  const Clock::time_point now = Clock::now();
  for (auto it = shared_->pending.lower_bound(prefix);
       it != shared_->pending.end() && std::string_view(it->first).starts_with(prefix);) {
    if (!claimable(*it->second, now)) {
      ++it;
      continue;
    }
    claimed.push_back(std::move(it->second));
    it = shared_->pending.erase(it);
  }
  return claimed;
}

void DeferredReleases::drain() {
  bool on_own_thread = false;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    on_own_thread = thread_.joinable() && std::this_thread::get_id() == shared_->thread_id;
  }
  if (on_own_thread) {
    // A settle on the thread dropped the last reference to the service: the
    // thread cannot join itself. What is left is settled here, while the
    // service's members still live; the thread ends when that settle returns.
    settle_all_here(*shared_);
    {
      std::lock_guard lock(shared_->mutex);
      shared_->orphaned = true;
    }
    thread_.detach();
    return;
  }
  shared_->added.notify_one();
  if (thread_.joinable()) thread_.join();
  settle_all_here(*shared_);  // added after the thread ended, or never handed to one
}

std::vector<std::unique_ptr<DeferredReleases::Release>> DeferredReleases::collect(Shared& shared,
                                                                                  Clock::time_point now) {
  std::vector<std::unique_ptr<Release>> due;
  for (auto it = shared.pending.begin(); it != shared.pending.end();) {
    Release& release = *it->second;
    std::optional<std::optional<RedisReply>> reply;  // set once settled: the reply, or none
    if (!release.pending) {
      if (now < release.send_again_at) {
        ++it;
        continue;
      }
    } else {
      try {
        // Not waited for: the reply if it came (kept by the pending reply for get(), which is not called again).
        if (std::optional<RedisReply> arrived = release.pending->take_if_arrived()) reply.emplace(std::move(arrived));
      } catch (const ConnectionError&) {
        reply.emplace(std::nullopt);  // the connection failed: unanswered
      }
      if (!reply && now >= release.pending->due()) reply.emplace(read_reply(release));  // its time is up: no wait
      if (!reply) {
        ++it;
        continue;
      }
    }
    std::unique_ptr<Release> taken = std::move(it->second);
    it = shared.pending.erase(it);
    if (!reply) {
      due.push_back(std::move(taken));
      continue;
    }
    taken->pending.reset();  // its connection back in the pool before any settle needs one
    shared.ready.emplace_back(std::move(taken), std::move(*reply));
  }
  return due;
}

void DeferredReleases::keep(Shared& shared, std::unique_ptr<Release> again) {
  // One of the same name pending already (every write hold of a key has one record; a lock retaken after a
  // forced release): kept under a name of its own, which no claim looks for (nothing of it is on a connection).
  std::string name = again->lock_name;
  for (std::uint64_t n = 0; shared.pending.find(name) != shared.pending.end(); ++n) {
    name = again->lock_name + '\x01' + std::to_string(n);
  }
  shared.pending.emplace(std::move(name), std::move(again));
}

bool DeferredReleases::draining() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->stopping;
}

void DeferredReleases::send_again(Shared& shared, std::vector<std::unique_ptr<Release>> due) {
  for (std::unique_ptr<Release>& release : due) {
    bool stopping = false;
    {
      std::lock_guard lock(shared.mutex);
      stopping = shared.stopping;
    }
    std::optional<RedisReply> reply;
    try {
      // Draining: one whose reply was lost is settled unanswered, not sent again (draining()).
      if (!(stopping && release->maybe_ran)) reply = shared.send_again(*release);
    } catch (const std::exception&) {
    }
    std::lock_guard lock(shared.mutex);
    shared.ready.emplace_back(std::move(release), std::move(reply));
  }
}

void DeferredReleases::run(const std::shared_ptr<Shared>& shared) {
  std::unique_lock lock(shared->mutex);
  Clock::time_point linger_until = Clock::now() + kLinger;
  for (;;) {
    if (shared->orphaned) return;
    if (!shared->ready.empty()) {
      Settled settled = std::move(shared->ready.front());
      shared->ready.pop_front();
      lock.unlock();
      std::unique_ptr<Release> again = shared->settle(std::move(settled.first), std::move(settled.second));
      lock.lock();
      if (shared->orphaned) return;  // that settle ended the service: drain() settled the rest
      if (again) keep(*shared, std::move(again));
      continue;
    }
    if (shared->pending.empty() && shared->stopping) return;
    const Clock::time_point now = Clock::now();
    if (!shared->pending.empty()) linger_until = now + kLinger;
    if (shared->pending.empty() && now >= linger_until) {
      // Idle: asleep until a release is added (add() wakes only a thread asleep like this, sparing a
      // wake-up per release while releases keep coming).
      shared->asleep = true;
      // `ready` too: an add() may have collected a reply into it after this thread last looked, and a claim
      // taken what it left pending.
      shared->added.wait(lock, [&] { return !shared->pending.empty() || !shared->ready.empty() || shared->stopping; });
      shared->asleep = false;
      linger_until = Clock::now() + kLinger;
    } else {
      // A sweep per tick: the replies that came are read (their connections back in the pool), and
      // those whose time is up are settled as unanswered.
      shared->added.wait_for(lock, kTick);
    }
    std::vector<std::unique_ptr<Release>> due = collect(*shared, Clock::now());
    if (!due.empty()) {
      lock.unlock();
      send_again(*shared, std::move(due));
      lock.lock();
    }
  }
}

void DeferredReleases::settle_all_here(Shared& shared) {
  for (;;) {
    std::unique_lock lock(shared.mutex);
    if (!shared.ready.empty()) {
      Settled settled = std::move(shared.ready.front());
      shared.ready.pop_front();
      lock.unlock();
      std::unique_ptr<Release> again = shared.settle(std::move(settled.first), std::move(settled.second));
      if (!again) continue;
      lock.lock();
      keep(shared, std::move(again));
      continue;
    }
    if (shared.pending.empty()) return;
    std::unique_ptr<Release> release = std::move(shared.pending.begin()->second);
    shared.pending.erase(shared.pending.begin());
    lock.unlock();
    if (!release->pending) {
      std::this_thread::sleep_until(release->send_again_at);
      std::vector<std::unique_ptr<Release>> due;
      due.push_back(std::move(release));
      send_again(shared, std::move(due));
      continue;
    }
    std::optional<RedisReply> reply = read_reply(*release);  // waits up to its command timeout
    lock.lock();
    shared.ready.emplace_back(std::move(release), std::move(reply));
  }
}

}  // namespace dlock::detail
