#pragma once
// The implementation behind RedisLockService, shared with the guards so that
// a guard can release its hold (and its lock stays renewed) even after the
// RedisLockService object is gone.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <spdlog/logger.h>

#include "dlock/detail/acquisition_id.hpp"
#include "dlock/detail/async_acquire.hpp"
#include "dlock/detail/deferred_releases.hpp"
#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/instance_registry.hpp"
#include "dlock/detail/io_threads.hpp"
#include "dlock/detail/key_prefix_series.hpp"
#include "dlock/detail/lock_names.hpp"
#include "dlock/detail/lost_notifier.hpp"
#include "dlock/detail/shared_request.hpp"
#include "dlock/detail/stats_recorder.hpp"
#include "dlock/detail/waiter_table.hpp"
#include "dlock/detail/waiting_calls.hpp"
#include "dlock/detail/watchdog.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/redis_executor.hpp"
#include "dlock/scripts.hpp"

namespace dlock::detail {

class AcquireTry;

struct AcquireStart {
  AcquireStart(Clock::time_point called_, Clock::time_point deadline_);
  AcquireStart(AcquireStart&&) noexcept;
  AcquireStart& operator=(AcquireStart&&) noexcept;
  ~AcquireStart();  // out of line: AcquireTry is complete there (lock/acquisition.cpp)

  std::optional<LockGuard> done;        // a re-entry, decided without a try of its own
  std::unique_ptr<AcquireTry> attempt;  // else: the new acquisition's try
  Clock::time_point called;
  Clock::time_point deadline;
};

// While Redis is unreachable, a waiter (of a lock, a read-write lock or a
// semaphore) tries again on this period.
inline constexpr Millis kOutageRetry{100};

// How long a thread re-entering a lock waits, even past its own wait, for
// another thread's round trip on the same hold (a moved guard's release).
inline constexpr Millis kOtherThreadsRoundTrip{250};

class ServiceCore : public std::enable_shared_from_this<ServiceCore> {
 public:
  // Why a wait ran out (not_had.cpp): one message for every primitive.
  struct NotHad {
    std::string what;            // "lock 'K'", "2 permit(s) of semaphore 'K'", ...
    bool tried_once = false;     // a try without a wait
    Millis waited{0};
    std::string busy;            // who holds it, as the primitive can tell
    std::string unacknowledged;  // set when the last grant was refused for too few replica acknowledgements
    std::string try_form = "try_lock";  // the call that tries without throwing, for the advice
  };

  ServiceCore(std::shared_ptr<RedisExecutor> redis, LockConfig config, std::shared_ptr<spdlog::logger> logger);
  // Stops the watchdog, then deletes the service's registry entry.
  ~ServiceCore();
  // Finishes what the constructor cannot: the watchdog reports losses through
  // a weak reference to this core, so a hook that drops the last reference to
  // the service never leaves the watchdog calling into a destroyed one.
  void start();

  // An empty guard when `throw_on_timeout` is false and the wait ran out.
  LockGuard acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout);
  // What an acquire call does before its first try, for both drivers (the
  // blocking calls above; the async API's, async_acquire.cpp): validation,
  // then a re-entry (`done`: its guard, or an empty one when the wait ran
  // out) or a new acquisition's try. `key` (and `request.key`) must outlive the try.
  AcquireStart start_acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout);
  AcquireStart start_acquire_shared(const SharedRequest& request, const LockOptions& options, bool throw_on_timeout);
  // The async API's acquisition (async_acquire.cpp): returns at once; `done` is called once, on an I/O thread.
  std::shared_ptr<AsyncOperation> acquire_async(AsyncRequest request, AsyncDone done);
  // dlock's threads for the async API's round trips and timers; started at their first use.
  IoThreads& io_threads() { return io_threads_; }
  // A read or write hold of a read-write lock, or permits of a semaphore (shared_acquire.cpp).
  LockGuard acquire_shared(const SharedRequest& request, const LockOptions& options, bool throw_on_timeout);
  // A semaphore's permit count, set now (its waiters are woken), and what it has: {count or -1, in use}.
  void set_permits(std::string_view name, long long permits);
  std::pair<long long, long long> permits_of(std::string_view name);
  enum class Release { in_redis, without_waiting, locally_only };
  // without_waiting (a guard's destructor): a final release is sent and its
  // reply read off the caller's path (deferred_releases.hpp); a loss it finds
  // is reported as the watchdog reports one, a failure logged and counted.
  // locally_only forgets the hold (and stops renewing) but leaves Redis to expire it.
  void release(Hold& hold, Release how = Release::in_redis);
  // Releases the most recent live hold of `key` by `owner` (unset: the calling thread's).
  void release_latest(std::string_view key, const std::optional<Owner>& owner);
  int hold_count(std::string_view key, const std::optional<Owner>& owner) const;
  // The hold's fencing token. Over a Redlock, the first call raises the
  // counter of every node still holding the lock to it (one round trip),
  // and throws LockLostError if no majority still did: a token is handed out
  // only once a later holder can no longer draw a smaller one.
  std::uint64_t fencing_token(const Hold& hold);
  void set_on_lost(std::function<void(const std::string&)> hook);
  std::size_t watched_locks() const { return watchdog_.watched_count(); }
  // The counters, and the gauges of what this service holds and waits for now (observability/service_stats.cpp).
  LockStats stats() const;
  spdlog::logger& logger() { return *logger_; }
  const LockConfig& config() const { return config_; }
  // The executor the service runs on, for reads beside the lock scripts (inspection/).
  RedisExecutor& redis() const { return *redis_; }
  // Throws InvalidArgument for a key or options lock() would refuse, without a round trip.
  void validate(std::string_view key, const LockOptions& options) const;

 private:
  // The steps of an acquire call (lock/acquisition.hpp) and each primitive's try use the service's internals.
  friend class Acquisition;
  friend class LockTry;
  friend class SharedTry;

  // Writes the service's registry entry and has the watchdog keep it alive;
  // without it (Redis refused) the service runs on, after one warning.
  void enter_registry();
  LockNames names_for(std::string_view key) const;
  // "<instance>:<owner>", the owner `owner` or, unset, the calling thread.
  std::string owner_token(const std::optional<Owner>& owner) const;
  // The key of held_ for one thread's holds of one user key.
  static std::string held_key(std::string_view owner, std::string_view key);
  // Throws dlock::Error in a process forked after this service was made.
  void refuse_after_fork() const;
  // Throws InvalidArgument when a blocking acquisition without an owner runs
  // on an event loop's thread (event_loop_check.hpp). `label` names the lock.
  static void refuse_thread_owner_on_event_loop(std::string_view label, const LockOptions& options);

  // A live acquisition of this thread's (held_key `held`), for re-entry; null if none.
  std::shared_ptr<HeldLock> find_live(const std::string& held) const;
  // One more hold on `lock`: its count set in Redis. Nothing when the lock
  // turned out lost or released meanwhile: the caller then acquires afresh.
  // An empty guard (or LockTimeoutError if `throw_on_timeout`) when another
  // thread changed the hold in Redis (a moved guard's release) for the whole
  // wait, or kOtherThreadsRoundTrip if that is longer.
  std::optional<LockGuard> reenter(const std::shared_ptr<HeldLock>& lock, Millis lease, bool renewed,
                                   Clock::time_point called, Clock::time_point deadline, bool throw_on_timeout);
  // A new acquisition's id, or the id of this thread's last acquisition of the
  // key if that one failed without knowing whether Redis granted it: its grant,
  // never handed to anyone, is then adopted rather than left to idle out its lease.
  std::string acquisition_id(const std::string& held, const std::string& thread_owner);
  void remember_orphan(const std::string& held, const std::string& id, Millis lease);
  void leave_line(const LockNames& names, const std::string& id);
  void release_inner(const std::shared_ptr<HeldLock>& lock, int holds_left);
  void release_final(const std::shared_ptr<HeldLock>& lock, bool wait_for_reply);
  // What a final release's reply says: counted released (the next turn told),
  // or the loss reported and LockLostError thrown, or RedisError for a reply
  // that is neither. Settles `offer` first.
  void finish_final_release(const std::shared_ptr<HeldLock>& lock, const LockNames& names,
                            WaiterTable::Offer& offer, const RedisReply& reply, Clock::time_point sent);
  // The reply of a release sent without waiting (none: it never came), read
  // by the deferred releases' thread or by the next acquisition of its lock.
  // Never throws, never waits for more than a round trip (a NOSCRIPT reply's
  // rerun): a release Redis answered with a passing state is returned, to be
  // sent again by that thread (DeferredReleases::Settle).
  // On the deferred thread (`on_deferred_thread`), it never borrows a pooled connection (DeferredReleases::Settle).
  std::unique_ptr<DeferredReleases::Release> settle_deferred_release(std::unique_ptr<DeferredReleases::Release> release,
                                                                     std::optional<RedisReply> reply,
                                                                     bool on_deferred_thread) noexcept;
  // Runs a release again after a passing state, in its plain form (its offer was declined), on the
  // deferred thread; its reply, or none.
  std::optional<RedisReply> send_release_again(DeferredReleases::Release& release);
  // A final release run again (a lock's with `offer_arg` if not empty, or a record's own): on the executor's
  // reserved (urgent) connection if `reserved` (the deferred thread), else on a pooled one.
  RedisReply rerun_release(const HeldLock& lock, std::string_view offer_arg, bool reserved);
  // `script` sent after `before`, this process's releases claimed from deferred_ (their replies still to
  // come): on the last one's connection, so Redis runs the releases first and this call does not wait for
  // their replies; the others' replies are read first. A call that found its lock still taken because a
  // release had to be run again (NOSCRIPT) is tried once more unless `is_grant` says it was granted.
  RedisReply run_after_releases(std::vector<std::unique_ptr<DeferredReleases::Release>> before, const Script& script,
                                std::span<const std::string_view> keys, std::span<const std::string_view> args,
                                ScriptRunner::ReplyTest is_grant);
  // A final release just sent, left to the deferred thread to read its reply; read and settled here
  // if that thread cannot take it.
  void leave_release(std::unique_ptr<DeferredReleases::Release> release);
  // A release settle_deferred_release() returned, handed to the deferred thread to send again (null: nothing).
  void keep_to_send_again(std::unique_ptr<DeferredReleases::Release> release);
  // What a caller is told when a final release may not have run.
  std::string unreleased_advice(const HeldLock& lock) const;
  // Best effort, errors logged at debug: the final release of an acquisition already known lost.
  void release_quietly_after_loss(const std::shared_ptr<HeldLock>& lock);
  // A new acquisition of the Redis hash `lock_name` (a lock, or a record of another primitive's: `own_release`).
  LockGuard grant(std::string_view key, std::string_view lock_name, const std::string& id, const std::string& held,
                  std::uint64_t fencing_token, Millis lease, bool renewed, Clock::time_point sent,
                  Clock::time_point called, int handoffs_in_a_row = 0,
                  std::shared_ptr<const OwnRelease> own_release = nullptr);
  // The final release of a semaphore's or read-write lock's hold (shared_acquire.cpp); unless
  // `wait_for_reply`, sent without waiting for its reply, as a lock's (deferred_releases.hpp).
  void release_own(const std::shared_ptr<HeldLock>& lock, bool wait_for_reply);
  // What that release's reply says: counted released (local waiters woken), or the loss reported and
  // LockLostError thrown, or, when an earlier send may have run (`maybe_ran`), ConnectionError.
  void finish_own_release(const std::shared_ptr<HeldLock>& lock, const RedisReply& reply, bool maybe_ran);
  RedisReply run_own_release(const HeldLock& lock);
  RedisReply run_own_release_of(const HeldLock& lock, const OwnRelease& own);
  // The acquisition id of this thread's live write hold of `key`'s read-write lock (not wholly detached); empty if none.
  std::string live_write_id(const std::string& thread_owner, std::string_view key) const;
  void leave_shared_line(const std::string& queue, const std::string& alive, const std::string& member,
                         const std::string& channel);
  [[noreturn]] void throw_shared_reply_error(const std::string& label, const std::string& base,
                                             const RedisReply& reply) const;
  // The lock, handed to this waiter inside a release by another thread of this process.
  LockGuard grant_direct(std::string_view key, const LockNames& names, const std::string& id,
                         const std::string& held, const WaiterTable::DirectGrant& direct, Millis lease, bool renewed,
                         Clock::time_point called);
  void handle_lost(const std::shared_ptr<HeldLock>& lock, const std::string& why);
  [[noreturn]] void throw_not_had(const NotHad& why) const;
  // Whether the lock exists in Redis (false if Redis could not be asked): a waiter's look before its first sleep.
  // Releases a grant that too few replicas acknowledged (lock.replica_acks).
  void undo_unacknowledged_grant(std::string_view key, const LockNames& names, const std::string& id);
  bool still_held(const LockNames& names);
  [[noreturn]] void throw_reply_error(std::string_view key, const LockNames& names, const RedisReply& reply,
                                      std::string_view during) const;
  // Throws ConnectionError, naming the state, if Redis answered "not now" (LOADING, BUSY, ...):
  // callers wait that out as they wait out an outage.
  void throw_if_transient(std::string_view key, const RedisReply& reply, std::string_view during) const;
  // Given the reply of a release of `lock`, runs it again while Redis answers
  // with a passing state (a slot migrating, a long script: nothing ran) and
  // the hold's validity lasts; returns the last reply either way. With
  // `acknowledged_if`, each run is followed by a WAIT (run_acknowledged).
  RedisReply retry_release(const HeldLock& lock, RedisReply reply, const Script& script,
                           std::span<const std::string_view> keys, std::span<const std::string_view> args,
                           ScriptRunner::ReplyTest acknowledged_if = nullptr);

  const std::shared_ptr<RedisExecutor> redis_;
  const LockConfig config_;
  const std::shared_ptr<spdlog::logger> logger_;
  const std::string instance_id_;  // 128 CSPRNG bits, hex
  // "window_ms retention_ms": the line's settings as the acquire and release scripts take them, in one argument.
  const std::string line_settings_;
  const unsigned fork_generation_;  // of the process that made this service
  AcquisitionClock acquisitions_;   // numbers the acquisition ids
  std::shared_ptr<InstanceRegistry> registry_;  // null when Redis refused the entry; shared with the watchdog's beat
  ScriptRunner scripts_;
  WaiterTable waiters_;
  StatsRecorder stats_;
  WaitingCalls waiting_calls_;         // the waiting gauge; each Acquisition marks itself
  KeyPrefixSeries key_prefix_series_;  // the gauges' key_prefix label (lock.metrics)

  mutable std::mutex mutex_;
  // Guarded by mutex_. Keyed by a view of each HeldLock's own held_key (its
  // lock outlives the entry): with a million locks held, a second copy of
  // every key would cost some 80 bytes a lock.
  std::unordered_map<std::string_view, std::shared_ptr<HeldLock>> held_;
  std::function<void(const std::string&)> on_lost_;                  // guarded by mutex_
  struct Orphan {
    std::string id;
    Clock::time_point expires;
  };
  std::unordered_map<std::string, Orphan> orphans_;  // guarded by mutex_; keyed by held_key()

  LostNotifier notifier_;  // runs on_lost hooks on a thread of its own
  // The async API's (lock.async_io_threads); every pending operation holds this core, so none outlives it.
  IoThreads io_threads_{config_.async_io_threads};

  // The line keeper (waiting/line_keeper.cpp): renews every kept line's
  // waiters in one script per line, every third of the turn window, while any waits.
  void keep_lines_soon();
  void keep_lines_at(Clock::time_point when);
  void keep_lines();
  std::mutex keeper_mutex_;
  bool keeper_running_ = false;  // guarded by keeper_mutex_

  // Final releases whose replies are still to come; drained first when the service goes.
  DeferredReleases deferred_{
      [this](std::unique_ptr<DeferredReleases::Release> release, std::optional<RedisReply> reply) {
        return settle_deferred_release(std::move(release), std::move(reply), true);
      },
      [this](DeferredReleases::Release& release) { return send_release_again(release); }};

  Watchdog watchdog_;  // last: its thread stops before the members it uses go
};

}  // namespace dlock::detail
