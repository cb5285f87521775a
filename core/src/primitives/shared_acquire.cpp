// Acquisition and release of the primitives beside the lock: a read-write
// lock's holds and a semaphore's permits. Their scripts (shared_scripts.hpp)
// keep a line as the lock's do; a hold is a record the lock's renew script
// renews, so re-entry, the watchdog, fixed leases, detach() and loss work as
// for a lock. What differs: releases wake every local waiter of the
// primitive (several may go at once) and are never handed over in-process.
#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/detail/shared_scripts.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"
#include "lock/acquisition.hpp"

namespace dlock::detail {

namespace {

// The keys and arguments of a record's release (views into `lock` and `own`, which must outlive it).
struct OwnReleaseCall {
  OwnReleaseCall(const HeldLock& lock, const OwnRelease& own)
      : keys(own.keys.begin(), own.keys.end()), args{lock.owner, own.channel} {}
  std::vector<std::string_view> keys;
  std::array<std::string_view, 2> args;
};

std::string_view noun_of(SharedKind kind) {
  switch (kind) {
    case SharedKind::read: return "read lock";
    case SharedKind::write: return "write lock";
    case SharedKind::permits: return "semaphore";
  }
  return "lock";
}

// Granted: a fencing token (an integer ≥ 0, or text past 2^53). Not granted: -1 - nap.
bool is_shared_grant(const RedisReply& reply) {
  return reply.type == RedisReply::Type::String || (reply.type == RedisReply::Type::Integer && reply.integer >= 0);
}

std::uint64_t token_of_grant(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::Integer) return static_cast<std::uint64_t>(reply.integer);
  return std::stoull(reply.str);
}

// Every Redis name of one read-write lock or semaphore.
struct SharedNames {
  SharedNames(std::string_view prefix, std::string_view key, SharedKind kind)
      : base(std::string(prefix) + '{' + std::string(key) + '}' +
             (kind == SharedKind::permits ? ":semaphore" : ":rw")) {}
  std::string base;  // the count (semaphore); the stem of every other name
  std::string name(std::string_view suffix) const { return base + std::string(suffix); }
};

}  // namespace

// A read-write lock's or a semaphore's try: its acquire script on the
// primitive's record, holders' index and line.
class SharedTry final : public AcquireTry {
 public:
  SharedTry(ServiceCore& core, const SharedRequest& request, std::string label, const std::string& held,
            std::string id, Millis lease, bool renewed, const std::string& thread_owner)
      : core_(core), key_(request.key), kind_(request.kind), permits_(request.kind == SharedKind::permits),
        asked_(request.permits), count_if_new_(request.count_if_new), label_(std::move(label)), held_(held),
        names_(core.config_.key_prefix, request.key, request.kind), id_(std::move(id)), lease_(lease),
        renewed_(renewed), lease_arg_(std::to_string(lease.count())),
        window_arg_(std::to_string(core.config_.turn_window.count())), queue_(names_.name(":queue")),
        alive_(names_.name(":alive")), channel_(names_.name(":released")) {
    auto own = std::make_shared<OwnRelease>();
    own->script = &record_release_script();
    own->channel = channel_;
    own->noun = std::string(noun_of(kind_));
    if (permits_) {
      const std::string holders = names_.name(":holders");
      keys_ = {names_.base, holders, queue_, alive_};
      record_ = holders + ':' + id_;
      member_ = id_;
      own->keys = {record_, queue_, holders};
    } else {
      const bool write = kind_ == SharedKind::write;
      const std::string readers = names_.name(":readers");
      keys_ = {names_.name(":write"), readers, queue_, alive_, names_.name(":fence")};
      record_ = write ? names_.name(":write") : readers + ':' + id_;
      member_ = (write ? 'w' : 'r') + id_;
      own->keys = write ? std::vector<std::string>{record_, queue_}
                        : std::vector<std::string>{record_, queue_, readers};
    }
    release_ = std::move(own);
    key_views_.assign(keys_.begin(), keys_.end());
    // The held table has one entry per hold of a semaphore (permits are never re-entered).
    table_key_ = permits_ ? ServiceCore::held_key(id_ + "#permits", key_) : held;
    // A read inside this owner's own write hold is granted at once: the script is told that hold's exact id, as
    // re-entry is decided by the owner (a detached write hold is no longer one: it is held against everyone).
    own_write_ = kind_ == SharedKind::read ? core.live_write_id(thread_owner, key_) : "";
  }

  Reading run(Millis wait_left) override {
    // The release is sent without waiting (a guard's destructor): its script must be known beforehand.
    core_.scripts_.preload(record_release_script());
    RedisReply reply;
    if (permits_) {
      const std::string settings =
          std::to_string(wait_left.count()) + ' ' + window_arg_ + ' ' + std::to_string(count_if_new_);
      const std::string asked_arg = std::to_string(asked_);
      const std::array<std::string_view, 4> args{id_, asked_arg, lease_arg_, settings};
      reply = send(semaphore_acquire_script(), args);
    } else {
      const std::string settings = std::string(kind_ == SharedKind::write ? "w " : "r ") +
                                   std::to_string(wait_left.count()) + ' ' + window_arg_ + ' ' +
                                   std::to_string(core_.config_.fence_retention.count());
      const std::array<std::string_view, 4> args{id_, lease_arg_, settings, own_write_};
      reply = send(read_write_acquire_script(), args);
    }
    if (!transient_state(reply).empty()) {
      throw ConnectionError(label_ + ": cannot acquire now: redis " + core_.redis_->endpoint() +
                            " is in a passing state (" + reply.str + ")");
    }
    if (reply.is_error() && reply.str.starts_with(kNotAcknowledgedError)) {
      return {Reading::Kind::not_acknowledged, 0, 0, reply.str.substr(kNotAcknowledgedError.size() + 1)};
    }
    if (is_shared_grant(reply)) return {Reading::Kind::granted, token_of_grant(reply), 0, {}};
    if (reply.type != RedisReply::Type::Integer) core_.throw_shared_reply_error(label_, names_.base, reply);
    return {Reading::Kind::busy, 0, -1 - reply.integer, {}};
  }
  // The acquire script; after this process's releases of the primitive's holds whose replies are still to
  // come (deferred_releases.hpp): Redis runs them first, so this call is never refused a hold or permits
  // this process has let go of, and does not wait for their replies.
  RedisReply send(const Script& script, std::span<const std::string_view> args) {
    std::vector<std::unique_ptr<DeferredReleases::Release>> before = core_.deferred_.claim_all(names_.base + ':');
    if (before.empty()) return core_.scripts_.run_acknowledged(script, key_views_, args, &is_shared_grant);
    return core_.run_after_releases(std::move(before), script, key_views_, args, &is_shared_grant);
  }
  LockGuard grant(const Reading& granted, Clock::time_point sent, Clock::time_point called) override {
    return core_.grant(key_, record_, id_, table_key_, granted.token, lease_, renewed_, sent, called, 0, release_);
  }
  LockGuard grant_direct(const WaiterTable::DirectGrant&, Clock::time_point) override {
    throw Error(label_ + ": handed over in-process, which only a lock's release does (a dlock bug)");
  }
  void give_back() override {
    const HeldLock given_back(std::string(key_), record_, id_, table_key_, 0);
    try {
      core_.run_own_release_of(given_back, *release_);
    } catch (const Error& e) {
      core_.logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", label_, e.what());
    }
  }
  void leave_line() override { core_.leave_shared_line(queue_, alive_, member_, channel_); }
  // Several holders may go at once and no cheap look tells whether one will: try again, now listening.
  bool release_still_to_come() override { return false; }
  void remember_orphan() override { core_.remember_orphan(held_, id_, lease_); }
  ServiceCore::NotHad not_had(long long) const override {
    ServiceCore::NotHad why;
    why.what = permits_ ? std::to_string(asked_) + " permit(s) of " + label_ : label_;
    why.busy = permits_ ? "too few permits free, or others wait ahead in line"
                        : "held in a conflicting mode, or others wait ahead in line";
    why.try_form = permits_ ? "try_acquire" : kind_ == SharedKind::read ? "try_read_lock" : "try_write_lock";
    return why;
  }
  std::string_view key() const override { return key_; }
  const std::string& channel() const override { return channel_; }
  const std::string& id() const override { return id_; }
  Millis lease() const override { return lease_; }

 private:
  ServiceCore& core_;
  const std::string_view key_;
  const SharedKind kind_;
  const bool permits_;
  const long long asked_;
  const long long count_if_new_;
  const std::string label_;
  const std::string held_;  // this owner's entry in the held table, where an orphan is looked for
  const SharedNames names_;
  const std::string id_;
  const Millis lease_;
  const bool renewed_;
  const std::string lease_arg_;
  const std::string window_arg_;
  const std::string queue_;
  const std::string alive_;
  const std::string channel_;
  std::vector<std::string> keys_;
  std::vector<std::string_view> key_views_;
  std::string record_;
  std::string member_;
  std::string table_key_;
  std::string own_write_;
  std::shared_ptr<const OwnRelease> release_;
};

LockGuard ServiceCore::acquire_shared(const SharedRequest& request, const LockOptions& options,
                                      bool throw_on_timeout) {
  // A waiter may sleep for seconds: keep this alive even if the service object is dropped meanwhile.
  const std::shared_ptr<ServiceCore> self = shared_from_this();
  AcquireStart start = start_acquire_shared(request, options, throw_on_timeout);
  if (start.done) return std::move(*start.done);
  Acquisition acquisition(*this, *start.attempt, start.called, start.deadline);
  return run_blocking(acquisition, throw_on_timeout);
}

AcquireStart ServiceCore::start_acquire_shared(const SharedRequest& request, const LockOptions& options,
                                               bool throw_on_timeout) {
  refuse_after_fork();
  const std::string_view noun = noun_of(request.kind);
  const std::string label = labelled(noun, request.key);
  validate(request.key, options);
  refuse_thread_owner_on_event_loop(label, options);
  if (scripts_.quorum()) {
    throw InvalidArgument(label + ": read-write locks and semaphores are not offered over a Redlock (redis.mode: "
                          "redlock); use lock() or lock_all() there, or a standalone, Sentinel or Cluster Redis");
  }
  const bool permits = request.kind == SharedKind::permits;
  if (permits && request.permits < 1) {
    throw InvalidArgument(label + ": " + std::to_string(request.permits) + " permits asked; ask for at least 1");
  }
  const Millis wait = options.wait.value_or(config_.wait);
  const bool renewed = !options.lease.has_value();
  const Millis lease = options.lease.value_or(config_.watchdog_timeout);
  const Clock::time_point called = Clock::now();
  const Clock::time_point deadline = called + wait;
  const std::string thread_owner = owner_token(options.owner);
  // Tokens are hex and ':', so "#read" and the like never collide with a lock's table entry.
  const std::string held =
      held_key(thread_owner + (request.kind == SharedKind::read ? "#read" : permits ? "#permits" : "#write"),
               request.key);

  AcquireStart start(called, deadline);
  if (!permits) {
    if (std::shared_ptr<HeldLock> mine = find_live(held)) {
      start.done = reenter(mine, lease, renewed, called, deadline, throw_on_timeout);
      if (start.done) return start;
    }
    if (request.kind == SharedKind::write && find_live(held_key(thread_owner + "#read", request.key))) {
      throw InvalidArgument(label + ": this thread holds its read lock; a write lock inside it would wait for that "
                            "read lock to end, and two threads doing so deadlock each other. Release the read lock "
                            "first, or take the write lock first (a read lock inside a write lock is allowed)");
    }
  }

  start.attempt = std::make_unique<SharedTry>(*this, request, label, held, acquisition_id(held, thread_owner), lease,
                                              renewed, thread_owner);
  return start;
}

std::string ServiceCore::live_write_id(const std::string& thread_owner, std::string_view key) const {
  // A write hold wholly detached has left the table; one with a hold detached and others live is still the
  // thread's (it may take the write again, as a lock after a partial detach), so a read inside it is too.
  const std::shared_ptr<HeldLock> write = find_live(held_key(thread_owner + "#write", key));
  return write ? write->owner : std::string();
}

void ServiceCore::leave_shared_line(const std::string& queue, const std::string& alive, const std::string& member,
                                    const std::string& channel) {
  // Best effort: a waiter left in line costs the others one turn window at most.
  try {
    const std::array<std::string_view, 2> keys{queue, alive};
    const std::array<std::string_view, 2> args{member, channel};
    scripts_.run(leave_shared_line_script(), keys, args);
  } catch (const Error& e) {
    logger_->debug("could not leave the line '{}': {}", printable(queue), e.what());
  }
  // The local waiters behind it wake now rather than after the notice's round trip.
  waiters_.notify(channel, "");
}

void ServiceCore::throw_shared_reply_error(const std::string& label, const std::string& base,
                                           const RedisReply& reply) const {
  const std::string& text = reply.str;
  if (reply.is_error() && text.starts_with("DLOCK_TOO_MANY")) {
    throw InvalidArgument(label + ": more permits asked than it has (" + text.substr(15) +
                          "); ask for at most that many, or raise its count with set_permits");
  }
  if (reply.is_error() && text.find("DLOCK_NO_PERMITS") != std::string::npos) {
    throw InvalidArgument(label + ": has no permit count in Redis yet; create it with "
                          "RedisLockService::semaphore(name, permits), or give it one with set_permits");
  }
  if (reply.is_error() && text.find(kWrongTypeError) != std::string::npos) {
    throw RedisError(label + ": Redis key '" + printable(base) + "' (or one of its companions) holds data that is "
                     "not dlock's (" + text + "); another program uses that name: delete it or choose another "
                     "lock.key_prefix");
  }
  throw RedisError(label + ": redis " + redis_->endpoint() + " answered " +
                   (reply.is_error() ? text : std::string("an unexpected reply")) +
                   "; check that the Redis user may run EVALSHA on keys with prefix '" + config_.key_prefix + "'");
}

RedisReply ServiceCore::run_own_release_of(const HeldLock& lock, const OwnRelease& own) {
  const OwnReleaseCall call(lock, own);
  return scripts_.run(*own.script, call.keys, call.args);
}

RedisReply ServiceCore::run_own_release(const HeldLock& lock) { return run_own_release_of(lock, *lock.own_release); }

void ServiceCore::release_own(const std::shared_ptr<HeldLock>& lock, bool wait_for_reply) {
  const OwnRelease& own = *lock->own_release;
  const OwnReleaseCall call(*lock, own);
  bool maybe_ran = false;  // an earlier try may have run, its reply lost with the connection
  if (!wait_for_reply) {
    // Sent, its reply read off this thread (deferred_releases.hpp), as a lock's. A connection that fails
    // as it is sent leaves it to the awaited path below, which tries fresh ones.
    std::unique_ptr<PendingReply> pending;
    try {
      pending = scripts_.start(*own.script, call.keys, call.args);
    } catch (const ConnectionError& e) {
      // Some executors (Sentinel, Cluster) run the whole call in start(): it may have run, its reply lost.
      maybe_ran = e.may_have_run();
      logger_->debug("{}: sending its release failed ({}); trying again, awaited", lock->label(), e.what());
    }
    if (pending) {
      leave_release(std::make_unique<DeferredReleases::Release>(
          DeferredReleases::Release{own.keys.front(), lock, std::move(pending), {}, {}, Clock::now()}));
      return;
    }
  }
  RedisReply reply;
  // A connection lost under the release is tried again, on a fresh connection, a few times while the hold
  // is valid (the release is owner-checked by id, so running it twice frees nothing else): not retried, the
  // permits or the read-write hold would stay taken for a whole lease, and every waiter with them, since
  // nobody renews it. Only a few times: with Redis down, each guard's destructor would wait out the retries.
  const Clock::time_point valid_until = lock->valid_until_time();
  Millis pause{10};
  int retries_left = kRecordReleaseResends;
  for (;;) {
    try {
      reply = retry_release(*lock, scripts_.run(*own.script, call.keys, call.args), *own.script, call.keys, call.args);
      throw_if_transient(lock->key, reply, "release");
      break;
    } catch (const ConnectionError& e) {
      maybe_ran = maybe_ran || e.may_have_run();
      if (retries_left-- > 0 && Clock::now() + pause < valid_until) {
        std::this_thread::sleep_for(pause);
        pause *= 2;
        continue;
      }
      stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
      throw ConnectionError(std::string(e.what()) + "; " + lock->label() +
                            " may not be released: if the release did not run, its hold expires by itself within its "
                            "lease (" + std::to_string(lock->lease_ms.load()) + " ms)");
    }
  }
  finish_own_release(lock, reply, maybe_ran);
}

void ServiceCore::finish_own_release(const std::shared_ptr<HeldLock>& lock, const RedisReply& reply, bool maybe_ran) {
  if (reply.type == RedisReply::Type::Integer && reply.integer == 0 && maybe_ran) {
    // Gone after a try whose reply was lost: that try may have freed it, or it was gone already (deleted,
    // expired, taken over) and the critical section may have overlapped another holder. Nobody can tell
    // which now, so the holder is told so, as a lock's holder is when its release's reply is lost: never
    // "released" on a guess. Counted as a failed release: its outcome is not known.
    stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
    throw ConnectionError(lock->label() + ": the release's reply was lost with its connection and the retry found "
                          "the hold gone: either that release freed it, or it was lost before (its lease ran out or "
                          "it was deleted) and the critical section may have overlapped another holder");
  } else if (reply.type == RedisReply::Type::Integer && reply.integer == 0) {
    handle_lost(lock, "release found it was no longer this holder's");
    throw LockLostError(lock->label() +
                        " was no longer this holder's when released (its lease ran out or it was deleted); the "
                        "critical section may have overlapped holders it excludes");
  }
  if (reply.type != RedisReply::Type::Integer) {
    stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
    throw RedisError(lock->label() + ": release answered " +
                     (reply.is_error() ? reply.str : std::string("an unexpected reply")));
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  // Waiters of this process wake now rather than after the notice's round trip.
  waiters_.notify(lock->own_release->channel, "");
}

void ServiceCore::set_permits(std::string_view name, long long permits) {
  refuse_after_fork();
  const std::string label = labelled("semaphore", name);
  validate(name, {});
  if (scripts_.quorum()) throw InvalidArgument(label + ": semaphores are not offered over a Redlock");
  if (permits < 0 || permits > kMaxPermits) {
    throw InvalidArgument(label + ": permit count " + std::to_string(permits) + " is out of range; pass 0 to " +
                          std::to_string(kMaxPermits));
  }
  const SharedNames names(config_.key_prefix, name, SharedKind::permits);
  const std::string queue = names.name(":queue"), channel = names.name(":released"), count = std::to_string(permits);
  const std::array<std::string_view, 2> keys{names.base, queue};
  const std::array<std::string_view, 2> args{count, channel};
  const RedisReply reply = scripts_.run(set_permits_script(), keys, args);
  throw_if_transient(name, reply, "set the permit count");
  if (reply.type != RedisReply::Type::Integer) throw_shared_reply_error(label, names.base, reply);
  waiters_.notify(channel, "");
}

std::pair<long long, long long> ServiceCore::permits_of(std::string_view name) {
  refuse_after_fork();
  const std::string label = labelled("semaphore", name);
  validate(name, {});
  if (scripts_.quorum()) throw InvalidArgument(label + ": semaphores are not offered over a Redlock");
  const SharedNames names(config_.key_prefix, name, SharedKind::permits);
  const std::string holders = names.name(":holders");
  const std::array<std::string_view, 2> keys{names.base, holders};
  // After this process's releases of its permits still in flight: a permit whose guard went is counted free.
  std::vector<std::unique_ptr<DeferredReleases::Release>> before = deferred_.claim_all(names.base + ':');
  const auto read_again_if_late = [](const RedisReply&) { return false; };
  const RedisReply reply = before.empty() ? scripts_.run(permits_in_use_script(), keys, {})
                                          : run_after_releases(std::move(before), permits_in_use_script(), keys, {},
                                                               read_again_if_late);
  throw_if_transient(name, reply, "read the permits");
  if (reply.type != RedisReply::Type::Array || reply.elements.size() != 2 ||
      reply.elements[0].type != RedisReply::Type::Integer || reply.elements[1].type != RedisReply::Type::Integer) {
    throw_shared_reply_error(label, names.base, reply);
  }
  return {reply.elements[0].integer, reply.elements[1].integer};
}

}  // namespace dlock::detail
