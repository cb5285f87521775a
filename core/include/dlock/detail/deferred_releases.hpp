#pragma once
// Final releases sent without waiting for their replies (a guard's
// destructor, DistributedMutex::unlock()): the caller returns once the
// release is written to Redis, and the reply is read when it comes, off the
// caller's path, by a thread of this table's own; or by the next acquisition
// of the same lock in this process, which claims it and is sent after it on
// its connection, so Redis runs the release first without the acquisition
// waiting for its reply. The thread sweeps the releases every millisecond
// and takes a reply only once it is that old, leaving the owner's next
// acquisition the time to claim it. A reply that does not come by its command timeout is
// settled as none; a release Redis answered with a passing state (LOADING,
// BUSY, a slot migrating) is sent again later by the thread, never by a
// caller. Destroying the table settles every release still pending first.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/waiter_table.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// How many times a semaphore's or read-write lock's release whose reply was lost is sent again,
// awaited (a guard's unlock()) or off the caller's path alike: left undone, the hold would keep
// every waiter out for a lease; only a few times, for with Redis down each would wait its pauses.
inline constexpr int kRecordReleaseResends = 3;

class DeferredReleases {
 public:
  struct Release {
    std::string lock_name;                  // the Redis hash: one pending release per name
    std::shared_ptr<HeldLock> lock;
    std::unique_ptr<PendingReply> pending;  // null while it waits to be sent again
    WaiterTable::Offer offer;               // a waiter of this process the release may grant the lock to
    std::string offer_arg;                  // as sent: a NOSCRIPT reply's rerun sends it again
    Clock::time_point sent;
    Clock::time_point send_again_at{};      // when `pending` is null
    Millis pause{10};                       // before the next send again, doubling
    // A semaphore's or read-write lock's release whose reply was lost is sent again a few times while the hold
    // is valid (as when it is awaited); a later "not this holder's" may then be that first send's doing.
    int resends_left = kRecordReleaseResends;
    bool maybe_ran = false;
  };
  // Reads a release's reply (none: it never came), on the table's thread.
  // Returns the release, its pending reply reset and send_again_at set, if
  // it must be sent again later; else null. Must not throw, and must never
  // wait for a pooled connection: the releases in the table hold some, and
  // only this thread gives them back.
  using Settle = std::function<std::unique_ptr<Release>(std::unique_ptr<Release>, std::optional<RedisReply>)>;
  // Runs a release again, on the table's thread, and returns its reply
  // (none: it never came). Never waits for a pooled connection either.
  using SendAgain = std::function<std::optional<RedisReply>(Release&)>;

  DeferredReleases(Settle settle, SendAgain send_again);
  ~DeferredReleases();  // drain(); in a fork child, forgets the parent's releases unread
  DeferredReleases(const DeferredReleases&) = delete;
  DeferredReleases& operator=(const DeferredReleases&) = delete;

  // Takes `release` to settle when its reply comes (or to send again at its
  // send_again_at). Gives it back if one of the same lock is pending already,
  // or the table is draining, or its thread could not start: the caller then
  // reads its reply itself.
  std::unique_ptr<Release> add(std::unique_ptr<Release> release);
  // The pending release of `lock_name` whose reply is still to come, now the
  // caller's to settle; null if none.
  std::unique_ptr<Release> claim(std::string_view lock_name);
  // As claim(), every such release whose lock name begins with `prefix` (a
  // read-write lock's or semaphore's holds), in the order of their names.
  std::vector<std::unique_ptr<Release>> claim_all(std::string_view prefix);
  // Whether drain() began: a reply lost is then not sent again (the end waits a command timeout at most).
  bool draining() const;
  // Settles every pending release (each reply awaited until its command
  // timeout, one that must be sent again sent) and stops the thread. On the
  // thread itself (a settle that dropped the last reference to the service),
  // settles them right here and lets the thread end by itself.
  void drain();

 private:
  using Settled = std::pair<std::unique_ptr<Release>, std::optional<RedisReply>>;
  // Shared with the thread, which may outlive this object by the end of one
  // settle (when that settle destroyed it: see drain()).
  struct Shared {
    Settle settle;
    SendAgain send_again;
    mutable std::mutex mutex;
    std::map<std::string, std::unique_ptr<Release>, std::less<>> pending;  // guarded by mutex
    std::deque<Settled> ready;  // guarded by mutex: replies read, to settle one at a time
    bool stopping = false;      // guarded by mutex
    bool orphaned = false;      // guarded by mutex: the object is gone; the thread ends at once
    bool asleep = false;        // guarded by mutex: the thread waits for a release to be added
    std::condition_variable added;
    std::thread::id thread_id;  // guarded by mutex
  };
  static void run(const std::shared_ptr<Shared>& shared);
  // Under shared.mutex: moves the releases whose reply came or whose time is
  // up to `ready` (their replies read, their connections back in the pool),
  // and returns those due to be sent again.
  static std::vector<std::unique_ptr<Release>> collect(Shared& shared, Clock::time_point now);
  // Under shared.mutex: a release a settle returned, to be sent again at its send_again_at.
  static void keep(Shared& shared, std::unique_ptr<Release> again);
  // Runs each again and makes it ready with the reply.
  static void send_again(Shared& shared, std::vector<std::unique_ptr<Release>> due);
  // Settles everything pending or ready, here, without the thread.
  static void settle_all_here(Shared& shared);

  const unsigned fork_generation_;
  const std::shared_ptr<Shared> shared_;
  std::thread thread_;  // started at the first release added
};

}  // namespace dlock::detail
