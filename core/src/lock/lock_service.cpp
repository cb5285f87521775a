#include "dlock/lock_service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <span>
#include <thread>

#include "dlock/detail/server_checks.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/detail/key_label.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/owner_token.hpp"

namespace dlock {
namespace detail {
namespace {

// A lock whose hash has no expiry (PERSISTed by hand) gives no PTTL to sleep
// on: retry on this period instead.
constexpr Millis kNoLeaseRetry{100};
// A releasing thread may grant the lock straight to a waiter of its own
// process, saving that waiter a round trip. In line order that is always
// fair; ahead of older waiters of other processes it is allowed only while
// the lock has passed within this process fewer than this many times in a
// row, so the oldest waiter in line is passed over at most this many times.
constexpr int kMaxLocalHandoffsInARow = 3;
// Acquisitions whose outcome is unknown, remembered for the thread's next try.
constexpr std::size_t kMaxOrphans = 4096;

std::shared_ptr<spdlog::logger> default_logger() {
  if (auto logger = spdlog::get("dlock")) return logger;
  return spdlog::default_logger();
}

bool is_integer(const RedisReply& reply, long long value) {
  return reply.type == RedisReply::Type::Integer && reply.integer == value;
}

// Whether a renew script's reply (a re-entry, an inner release) says the hold is still this acquisition's.
bool is_hold_kept(const RedisReply& reply) { return reply.type == RedisReply::Type::Integer && reply.integer == 1; }

// With lock.replica_acks, a reply standing for writes too few replicas acknowledged.
bool is_unacknowledged(const RedisReply& reply) {
  return reply.is_error() && reply.str.starts_with(kNotAcknowledgedError);
}

// Whether an acquire script's reply is a grant: its token, an integer > 0 or text.
bool is_grant(const RedisReply& reply) {
  return reply.type == RedisReply::Type::String || (reply.type == RedisReply::Type::Integer && reply.integer > 0);
}

// A fencing token as the scripts send it: an integer, or text past 2^53.
std::optional<std::uint64_t> token_of(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::Integer && reply.integer >= 0) return static_cast<std::uint64_t>(reply.integer);
  if (reply.type != RedisReply::Type::String || reply.str.empty()) return std::nullopt;
  std::uint64_t token = 0;
  const auto [end, ec] = std::from_chars(reply.str.data(), reply.str.data() + reply.str.size(), token);
  if (ec != std::errc() || end != reply.str.data() + reply.str.size()) return std::nullopt;
  return token;
}

}  // namespace

ServiceCore::ServiceCore(std::shared_ptr<RedisExecutor> redis, LockConfig config,
                         std::shared_ptr<spdlog::logger> logger)
    : redis_(std::move(redis)),
      config_(std::move(config)),
      logger_(logger ? std::move(logger) : default_logger()),
      instance_id_(random_instance_id()),
      line_settings_(std::to_string(config_.turn_window.count()) + ' ' +
                     std::to_string(config_.fence_retention.count())),
      fork_generation_(fork_generation()),
      scripts_(*redis_, ReplicaAcknowledgement{config_.replica_acks, config_.replica_ack_timeout}),
      waiters_(*redis_),
      notifier_(*logger_),
      watchdog_(scripts_, stats_, logger_) {
  if (config_.watchdog_timeout <= Millis(0)) {
    throw InvalidArgument("lock.watchdog_timeout_ms is " + std::to_string(config_.watchdog_timeout.count()) +
                          "; it must be a positive number of milliseconds (default 30000)");
  }
  if (config_.wait < Millis(0)) {
    throw InvalidArgument("lock.wait_ms is " + std::to_string(config_.wait.count()) +
                          "; it must be 0 (try once) or a positive number of milliseconds");
  }
  if (config_.key_prefix.find_first_of("{}") != std::string::npos) {
    throw InvalidArgument("lock.key_prefix '" + config_.key_prefix +
                          "' holds a brace; dlock puts each key in braces after the prefix ({K}, a Redis Cluster hash "
                          "tag that keeps a lock's names in one slot), and a brace before it would take their place: "
                          "use a prefix without '{' or '}'");
  }
  if (config_.max_key_bytes == 0) {
    throw InvalidArgument("lock.max_key_bytes is 0; it must be at least 1 (default 1024)");
  }
  if (config_.turn_window < Millis(3)) {
    throw InvalidArgument("lock.turn_window_ms is " + std::to_string(config_.turn_window.count()) +
                          "; it must be at least 3 ms (default 1000)");
  }
  if (config_.replica_acks < 0 || config_.replica_ack_timeout <= Millis(0)) {
    throw InvalidArgument("lock.replica_acks is " + std::to_string(config_.replica_acks) +
                          " and lock.replica_ack_timeout_ms " + std::to_string(config_.replica_ack_timeout.count()) +
                          "; the first must be 0 (no WAIT) or more, the second a positive number of milliseconds");
  }
  if (config_.fence_retention <= Millis(0)) {
    throw InvalidArgument("lock.fence_retention_ms is " + std::to_string(config_.fence_retention.count()) +
                          "; it must be a positive number of milliseconds (default 604800000)");
  }
  scripts_.load_all();
  warn_if_evicting(*redis_, *logger_);
  warn_if_too_few_replicas(*redis_, *logger_, config_.replica_acks);
  enter_registry();
}

void ServiceCore::enter_registry() {
  auto registry = std::make_shared<InstanceRegistry>(redis_, instance_key(config_.key_prefix, instance_id_),
                                                     this_process(acquisitions_.started_unix_ms()),
                                                     config_.watchdog_timeout, logger_);
  if (!registry->enter()) return;
  registry_ = registry;
  // Once per lease period, on the watchdog's renewer thread: no cost per lock.
  watchdog_.keep_alive(registry->period(),
                       [registry](Clock::time_point deadline) { registry->refresh(deadline); });
}

ServiceCore::~ServiceCore() {
  // First, so that no beat can write the entry again after it is deleted.
  watchdog_.stop();
  // A fork child must not delete its parent's entry.
  if (registry_ && fork_generation() == fork_generation_) registry_->leave();
}

void ServiceCore::start() {
  std::weak_ptr<ServiceCore> weak = weak_from_this();
  watchdog_.set_lost_handler([weak](const std::shared_ptr<HeldLock>& lock, const std::string& why) {
    if (auto core = weak.lock()) core->handle_lost(lock, why);
  });
}

LockNames ServiceCore::names_for(std::string_view key) const { return LockNames(config_.key_prefix, key); }

std::string ServiceCore::owner_token() const {
  const std::string& thread = current_thread_id();
  std::string token;
  token.reserve(instance_id_.size() + 1 + thread.size());
  return token.append(instance_id_).append(1, ':').append(thread);
}

std::string ServiceCore::held_key(std::string_view owner, std::string_view key) {
  // Tokens are hex and ':', never '|', so the pair reads back unambiguously.
  std::string joined;
  joined.reserve(owner.size() + 1 + key.size());
  return joined.append(owner).append(1, '|').append(key);
}

void ServiceCore::refuse_after_fork() const {
  if (fork_generation() == fork_generation_) return;
  throw Error("this lock service was created before fork(); a child process must not use it (it would share the "
              "parent's connections and owner identity, and could take the parent's locks as its own): create a "
              "new service in the child with make_lock_service");
}

void ServiceCore::validate(std::string_view key, const LockOptions& options) const {
  if (key.empty()) throw InvalidArgument("lock key is empty; pass a non-empty key such as \"stock:42\"");
  if (key.size() > config_.max_key_bytes) {
    throw InvalidArgument(lock_label(key) + ": key is " + std::to_string(key.size()) +
                          " bytes, longer than lock.max_key_bytes (" + std::to_string(config_.max_key_bytes) +
                          "); use a shorter key or raise lock.max_key_bytes");
  }
  if (key.front() == '}') {
    // "P{}x}" has an empty hash tag: a cluster hashes each of the lock's names
    // whole, into different slots, and refuses every script naming them.
    // One server has no slots: there the key is as good as any.
    const LockNames names = names_for(key);
    if (redis_->script_group(names.lock()) != redis_->script_group(names.queue())) {
      throw InvalidArgument(lock_label(key) + ": key begins with '}', which leaves the Redis Cluster hash tag around "
                            "it ({K}) empty, so the lock's names would fall in different slots; begin the key with "
                            "another character");
    }
  }
  if (options.wait && *options.wait < Millis(0)) {
    throw InvalidArgument(lock_label(key) + ": wait of " + std::to_string(options.wait->count()) +
                          " ms is negative; pass 0 to try once, or a positive wait");
  }
  if (options.lease && *options.lease <= Millis(0)) {
    throw InvalidArgument(lock_label(key) + ": lease of " + std::to_string(options.lease->count()) +
                          " ms is not positive; pass a positive lease, or none to let the watchdog renew it");
  }
  if (options.lease && config_.longest_lease > Millis(0) && *options.lease > config_.longest_lease) {
    throw InvalidArgument(lock_label(key) + ": lease of " + std::to_string(options.lease->count()) +
                          " ms is longer than a restarted Redlock node sits out (" +
                          std::to_string(config_.longest_lease.count()) +
                          " ms, redis.redlock.restarted_node_delay_ms); pass a shorter lease, or raise that setting");
  }
}

void ServiceCore::throw_if_transient(std::string_view key, const RedisReply& reply, std::string_view during) const {
  const std::string_view state = transient_state(reply);
  if (state.empty()) return;
  throw ConnectionError(lock_label(key) + ": cannot " + std::string(during) + " now: redis " + redis_->endpoint() +
                        " is in a passing state (" + reply.str + "); dlock waits it out within the call's wait: wait "
                        "longer (LockOptions::wait or lock.wait_ms) if it lasts");
}

RedisReply ServiceCore::retry_release(const HeldLock& lock, RedisReply reply, const Script& script,
                                      std::span<const std::string_view> keys, std::span<const std::string_view> args,
                                      ScriptRunner::ReplyTest acknowledged_if) {
  // Not retried, the lock would stay held for the rest of its lease (nobody
  // renews it once its release began), and every waiter with it: a slot
  // migration refuses each script naming a lock's absent line keys (TRYAGAIN)
  // for as long as it lasts.
  Millis pause{10};
  while (!transient_state(reply).empty() && Clock::now() + pause < lock.valid_until_time()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kOutageRetry);
    reply = acknowledged_if ? scripts_.run_acknowledged(script, keys, args, acknowledged_if)
                            : scripts_.run(script, keys, args);
  }
  return reply;
}

void ServiceCore::throw_reply_error(std::string_view key, const LockNames& names, const RedisReply& reply,
                                    std::string_view during) const {
  if (reply.is_error() && reply.str.find(kWrongTypeError) != std::string::npos) {
    throw RedisError(lock_label(key) + ": cannot " + std::string(during) + ": Redis key '" + printable(names.lock()) +
                     "' (or its fencing counter or line) holds data that is not a dlock lock (" + reply.str +
                     "); another program uses that name: delete it or choose another lock.key_prefix");
  }
  throw RedisError(lock_label(key) + ": cannot " + std::string(during) + ": redis " + redis_->endpoint() +
                   " answered " + (reply.is_error() ? reply.str : std::string("an unexpected reply")) +
                   "; check that the Redis user may run EVALSHA on keys with prefix '" + config_.key_prefix + "'");
}

LockGuard ServiceCore::acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout) {
  refuse_after_fork();
  // A waiter may sleep for seconds: keep this alive even if the service object is dropped meanwhile.
  const std::shared_ptr<ServiceCore> self = shared_from_this();
  validate(key, options);
  const Millis wait = options.wait.value_or(config_.wait);
  const bool renewed = !options.lease.has_value();
  const Millis lease = options.lease.value_or(config_.watchdog_timeout);
  const Clock::time_point called = Clock::now();
  const Clock::time_point deadline = called + wait;
  const std::string thread_owner = owner_token();
  const std::string held = held_key(thread_owner, key);
  if (std::shared_ptr<HeldLock> mine = find_live(held)) {
    if (std::optional<LockGuard> guard = reenter(mine, lease, renewed, called, deadline, throw_on_timeout)) {
      return std::move(*guard);
    }
  }
  return acquire_first(key, held, thread_owner, lease, renewed, called, deadline, throw_on_timeout);
}

std::shared_ptr<HeldLock> ServiceCore::find_live(const std::string& held) const {
  std::lock_guard guard(mutex_);
  auto it = held_.find(held);
  if (it == held_.end() || it->second->is_lost()) return nullptr;
  return it->second;
}

std::optional<LockGuard> ServiceCore::reenter(const std::shared_ptr<HeldLock>& lock, Millis lease, bool renewed,
                                              Clock::time_point called, Clock::time_point deadline,
                                              bool throw_on_timeout) {
  // A guard of this hold moved to another thread may be releasing it there:
  // one round trip, usually, which even a try without a wait waits for (a
  // thread re-entering its own lock must not fail for that), but repeated
  // through an outage or BUSY for up to the hold's validity, which a caller
  // waits for only within its own wait.
  std::unique_lock io(lock->io, std::defer_lock);
  const Clock::time_point io_deadline = std::max(deadline, called + kOtherThreadsRoundTrip);
  if (!io.try_lock_until(io_deadline)) {
    (deadline == called ? stats_.busy : stats_.timeouts).fetch_add(1, std::memory_order_relaxed);
    if (!throw_on_timeout) return LockGuard{};
    throw LockTimeoutError(lock->label() + ": this thread holds it, but another thread was changing that hold in "
                           "Redis (releasing a guard moved to it) for all of " +
                           std::to_string(std::chrono::duration_cast<Millis>(io_deadline - called).count()) +
                           " ms this call could wait; wait longer (LockOptions::wait or lock.wait_ms)");
  }
  int holds = 0;
  {
    std::lock_guard guard(mutex_);
    if (lock->holds == 0 || lock->lost_flag.load()) return std::nullopt;  // released or lost while waiting for io
    holds = lock->holds;
  }
  const std::string lease_arg = std::to_string(lease.count());
  const std::string count_arg = std::to_string(holds + 1);
  const std::array<std::string_view, 1> keys{lock->lock_name};
  const std::array<std::string_view, 3> args{lock->owner, lease_arg, count_arg};
  Clock::time_point sent;
  bool acknowledged = false;  // with lock.replica_acks, whether enough replicas have the lease it extended
  for (;;) {
    sent = Clock::now();
    RedisReply reply;
    try {
      // With lock.replica_acks a WAIT follows: the lease it extends counts only once acknowledged.
      reply = scripts_.run_acknowledged(kRenewScript, keys, args, &is_hold_kept);
      throw_if_transient(lock->key, reply, "re-enter");
    } catch (const ConnectionError&) {
      // The count is set, not added to: a try repeated after a lost reply counts once.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) throw;
      std::this_thread::sleep_for(std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline - now)));
      continue;
    }
    if (is_hold_kept(reply) || is_unacknowledged(reply)) {  // re-entered, acknowledged or not
      acknowledged = is_hold_kept(reply);
      break;
    }
    if (is_integer(reply, 0)) {
      io.unlock();
      handle_lost(lock, "a re-entry found it no longer this owner's (its lease ran out, or it was deleted)");
      return std::nullopt;
    }
    throw_reply_error(lock->key, names_for(lock->key), reply, "re-enter");
  }
  std::shared_ptr<Hold> hold;
  bool watch = false;
  {
    std::lock_guard guard(mutex_);
    stats_.reentered.fetch_add(1, std::memory_order_relaxed);
    ++lock->holds;
    if (renewed && !lock->renewed.exchange(true)) {
      lock->lease_ms = lease.count();
      watch = true;
    } else if (!lock->renewed.load()) {
      lock->lease_ms = std::max<std::int64_t>(lock->lease_ms.load(), lease.count());
    }
    // With lock.replica_acks only an acknowledged write extends the validity.
    if (acknowledged) lock->extend_validity(sent, lease);
    hold = std::make_shared<Hold>(lock);
    lock->stack.push_back(hold);
  }
  io.unlock();
  if (watch) watchdog_.watch(lock, sent);
  stats_.record_acquire_latency(Clock::now() - called);
  return LockGuard(shared_from_this(), std::move(hold));
}

std::string ServiceCore::acquisition_id(const std::string& held, const std::string& thread_owner) {
  {
    std::lock_guard guard(mutex_);
    auto it = orphans_.find(held);
    if (it != orphans_.end()) {
      std::string id = std::move(it->second.id);
      const bool live = Clock::now() < it->second.expires;
      orphans_.erase(it);
      if (live) return id;
    }
  }
  return format_acquisition_id(thread_owner, acquisitions_.next());
}

void ServiceCore::remember_orphan(const std::string& held, const std::string& id, Millis lease) {
  const Clock::time_point now = Clock::now();
  std::lock_guard guard(mutex_);
  if (orphans_.size() >= kMaxOrphans) {
    std::erase_if(orphans_, [now](const auto& entry) { return entry.second.expires <= now; });
  }
  if (orphans_.size() >= kMaxOrphans) return;  // the grant, if any, idles out its lease
  orphans_[held] = Orphan{id, now + lease};
}

LockGuard ServiceCore::acquire_first(std::string_view key, const std::string& held, const std::string& thread_owner,
                                     Millis lease, bool renewed, Clock::time_point called,
                                     Clock::time_point deadline, bool throw_on_timeout) {
  const LockNames names = names_for(key);
  const std::string id = acquisition_id(held, thread_owner);
  const std::array<std::string_view, 5> script_keys = names.script_keys();
  const std::string lease_arg = std::to_string(lease.count());
  // A waiter re-confirms its place in line at least this often.
  const Millis refresh = config_.turn_window / 3;

  // Over a Redlock, the place in line is this caller's first try, by its own clock, on every node alike.
  const std::string arrival_arg =
      scripts_.quorum() ? ' ' + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count())
                        : std::string();
  WaiterTable::Ticket ticket;
  long long last_nap_ms = 0;
  std::string unacknowledged;  // why the last grant did not count (lock.replica_acks), if it did not
  for (;;) {
    const Clock::time_point sent = Clock::now();
    const Millis wait_left = std::max(Millis(0), std::chrono::ceil<Millis>(deadline - sent));
    RedisReply reply;
    try {
      const std::string settings_arg = std::to_string(wait_left.count()) + ' ' + line_settings_ + arrival_arg;
      const std::array<std::string_view, 3> args{id, lease_arg, settings_arg};
      reply = scripts_.run_acknowledged(kAcquireScript, script_keys, args, &is_grant);
      throw_if_transient(key, reply, "acquire");
    } catch (const ConnectionError&) {
      // An outage shorter than the wait is waited out; a reply lost to it is
      // harmless, since the next try, with the same id, adopts what it left.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        remember_orphan(held, id, lease);
        throw;
      }
      const Millis nap = std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline - now));
      if (ticket) {
        // The subscriber's reconnect notice ends it early.
        if (auto direct = ticket.wait(nap)) return grant_direct(key, names, id, held, *direct, lease, renewed, called);
      } else {
        std::this_thread::sleep_for(nap);
      }
      continue;
    }
    if (reply.is_error() && reply.str.starts_with(kNotAcknowledgedError)) {
      // Granted on the master, but a failover could lose it: give it back
      // (the next in line is told) and try again within the wait.
      unacknowledged = reply.str.substr(kNotAcknowledgedError.size() + 1);
      logger_->debug("{}: granted but {}; giving it back and trying again", lock_label(key), unacknowledged);
      undo_unacknowledged_grant(key, names, id);
      last_nap_ms = config_.replica_ack_timeout.count();
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      std::this_thread::sleep_for(std::min(std::chrono::ceil<Millis>(deadline - now), refresh));
      continue;
    }
    // Granted: the token (an integer > 0, or text). Not granted: -1 - nap.
    if (is_grant(reply)) {
      const std::optional<std::uint64_t> token = token_of(reply);
      if (!token) throw_reply_error(key, names, reply, "acquire");
      return grant(key, names.lock(), id, held, *token, lease, renewed, sent, called);
    }
    if (reply.type != RedisReply::Type::Integer) throw_reply_error(key, names, reply, "acquire");
    last_nap_ms = -1 - reply.integer;
    Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    // Never sleep past the holder's lease (a crashed holder publishes nothing)
    // nor past a third of the turn window (the place in line must be renewed).
    const Millis nap = last_nap_ms >= 0 ? Millis(last_nap_ms + 1) : last_nap_ms == -1 ? kNoLeaseRetry : Millis(1);
    const Clock::time_point wake = std::min({now + std::min(nap, refresh), deadline});
    if (!ticket) {
      stats_.contended.fetch_add(1, std::memory_order_relaxed);
      // Unconfirmed, a waiter falls back to its timed tries, which must not stop for long.
      waiters_.enter(names.channel(), id, lease.count(), ticket, std::min(deadline, Clock::now() + refresh));
      // Listening now, it hears every release from here on; one between the
      // try above and now it looks for before it sleeps. While the lock is
      // held, its release is still to come: a plain EXISTS tells, at a
      // fraction of what another try would cost the server. Unless the look
      // would end past the time to renew its place in line (a slow link, a
      // slow subscription): then it tries at once, which renews it.
      if (Clock::now() + (now - sent) >= wake || !still_held(names)) continue;
      // Subscribing took time of its own (up to the wait's end, unconfirmed): the sleep still ends on time.
      now = Clock::now();
      if (now >= deadline) break;
    }
    if (auto direct = ticket.wait(std::max(Millis(0), std::chrono::ceil<Millis>(wake - now)))) {
      return grant_direct(key, names, id, held, *direct, lease, renewed, called);
    }
  }
  const bool tried_once = deadline == called;
  // A try without a wait never joined the line (its acquire said wait 0).
  if (!tried_once) leave_line(names, id);
  (tried_once ? stats_.busy : stats_.timeouts).fetch_add(1, std::memory_order_relaxed);
  if (!throw_on_timeout) return {};
  if (!unacknowledged.empty()) {
    throw LockTimeoutError(lock_label(key) + ": granted, but not acknowledged by enough replicas (" +
                           unacknowledged + "), so not taken; check the replicas (INFO replication: connected_slaves, "
                           "lag) or lower lock.replica_acks, or raise lock.replica_ack_timeout_ms");
  }
  const std::string left = "lease or turn left " + std::to_string(last_nap_ms) + " ms";
  if (tried_once) {
    throw LockTimeoutError(lock_label(key) + ": busy; tried once, without waiting: another owner holds it or waits "
                           "ahead in line (" + left + "); to wait for it, pass a wait (LockOptions::wait, or "
                           "lock.wait_ms in the config)");
  }
  const long long waited_ms = std::chrono::duration_cast<Millis>(deadline - called).count();
  throw LockTimeoutError(lock_label(key) + ": still busy after waiting " + std::to_string(waited_ms) +
                         " ms: another owner holds it or waits ahead in line (" + left + "); wait longer "
                         "(LockOptions::wait or lock.wait_ms) or use try_lock");
}

void ServiceCore::undo_unacknowledged_grant(std::string_view key, const LockNames& names, const std::string& id) {
  const std::array<std::string_view, 2> args{id, line_settings_};
  try {
    const RedisReply reply = scripts_.run(kReleaseScript, names.script_keys(), args);
    if (reply.is_error()) {
      logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), reply.str);
    }
  } catch (const ConnectionError& e) {
    // Unreleased, it idles out its lease (nobody renews it); the next try, with the same id, adopts it.
    logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), e.what());
  }
}

bool ServiceCore::still_held(const LockNames& names) {
  try {
    const std::array<std::string_view, 2> exists{"EXISTS", names.lock()};
    return is_integer(redis_->command_parts(exists), 1);
  } catch (const ConnectionError&) {
    return false;  // the next try finds out, and waits out the outage as any try does
  }
}

LockGuard ServiceCore::grant_direct(std::string_view key, const LockNames& names, const std::string& id,
                                    const std::string& held, const WaiterTable::DirectGrant& direct, Millis lease,
                                    bool renewed, Clock::time_point called) {
  stats_.handed_over.fetch_add(1, std::memory_order_relaxed);
  return grant(key, names.lock(), id, held, direct.fencing_token, lease, renewed, direct.sent, called,
               direct.handoffs_in_a_row);
}

LockGuard ServiceCore::grant(std::string_view key, std::string_view lock_name, const std::string& id,
                             const std::string& held, std::uint64_t fencing_token, Millis lease, bool renewed,
                             Clock::time_point sent, Clock::time_point called, int handoffs_in_a_row,
                             std::shared_ptr<const OwnRelease> own_release) {
  auto lock = std::make_shared<HeldLock>(std::string(key), std::string(lock_name), id, held, fencing_token);
  lock->own_release = std::move(own_release);
  lock->renewed = renewed;
  lock->lease_ms = lease.count();
  lock->holds = 1;
  lock->handoffs_in_a_row = handoffs_in_a_row;
  lock->extend_validity(sent, lease);
  auto hold = std::make_shared<Hold>(lock);
  lock->stack.push_back(hold);
  std::shared_ptr<HeldLock> stale;
  {
    std::lock_guard guard(mutex_);
    std::shared_ptr<HeldLock>& slot = held_[held];
    // Redis granted a new acquisition while we still had a record: it had expired unnoticed.
    if (slot && !slot->lost_flag.load()) stale = slot;
    slot = lock;
  }
  stats_.acquired.fetch_add(1, std::memory_order_relaxed);
  if (stale) handle_lost(stale, "its lease ran out before this thread took the lock again");
  watchdog_.watch(lock, sent);
  stats_.record_acquire_latency(Clock::now() - called);
  return LockGuard(shared_from_this(), std::move(hold));
}

void ServiceCore::release(Hold& hold, Release how) {
  refuse_after_fork();
  if (hold.released.exchange(true)) return;
  const std::shared_ptr<HeldLock>& lock = hold.lock;
  std::unique_lock io(lock->io);
  bool final = false;
  bool detached = false;
  int holds_left = 0;
  {
    std::lock_guard guard(mutex_);
    holds_left = --lock->holds;
    std::erase_if(lock->stack, [&hold](const std::weak_ptr<Hold>& weak) {
      auto live = weak.lock();
      return !live || live.get() == &hold;
    });
    if (how == Release::locally_only) lock->detached = true;
    detached = lock->detached;
    final = holds_left == 0;
    if (final) {
      auto it = held_.find(lock->held_key);
      if (it != held_.end() && it->second == lock) held_.erase(it);
    }
  }
  // Before the release is sent, so no renewal can re-extend a released lock.
  if (final) watchdog_.unwatch(*lock);
  if (how == Release::locally_only) return;
  if (!lock->lost_flag.load() && lock->is_lost()) {
    // Its validity ran out by this holder's clock and the watchdog, which gives
    // that verdict on a thread of its own, has not said so yet: the verdict
    // must not depend on which thread runs first.
    handle_lost(lock, "its lease ran out by the local clock before its release");
  }
  if (lock->lost_flag.load()) {
    // Its hold may still be in Redis (a renewal that came too late, a grant
    // that arrived already expired by our clock): the release, owner-checked
    // by this acquisition's id, frees it now rather than a lease later, and
    // never touches a later owner's lock.
    if (final && !detached) release_quietly_after_loss(lock);
    throw LockLostError(lock->label() +
                        " was lost before this release (its lease ran out or it was taken over); another owner's "
                        "lock was left untouched; the critical section may have overlapped another holder");
  }
  if (!final) return release_inner(lock, holds_left);
  // A detached hold keeps the lock until its lease ends, whoever releases last.
  if (detached) return;
  release_final(lock);
}

void ServiceCore::release_quietly_after_loss(const std::shared_ptr<HeldLock>& lock) {
  try {
    if (lock->own_release) {
      run_own_release(*lock);
      return;
    }
    const LockNames names = names_for(lock->key);
    const std::array<std::string_view, 2> args{lock->owner, line_settings_};
    scripts_.run(kReleaseScript, names.script_keys(), args);
  } catch (const Error& e) {
    logger_->debug("{}: releasing a hold that may have outlived its loss failed: {}", lock->label(), e.what());
  }
}

void ServiceCore::release_inner(const std::shared_ptr<HeldLock>& lock, int holds_left) {
  const std::string lease_arg = std::to_string(lock->lease_ms.load());
  const std::string count_arg = std::to_string(holds_left);
  const std::array<std::string_view, 1> keys{lock->lock_name};
  const std::array<std::string_view, 3> args{lock->owner, lease_arg, count_arg};
  const Clock::time_point sent = Clock::now();
  RedisReply reply;
  try {
    reply = retry_release(*lock, scripts_.run_acknowledged(kRenewScript, keys, args, &is_hold_kept), kRenewScript, keys,
                          args, &is_hold_kept);
    throw_if_transient(lock->key, reply, "release");
  } catch (const ConnectionError& e) {
    throw ConnectionError(std::string(e.what()) + "; " + lock->label() +
                          ": its hold count in Redis may be one too high until the outermost release, which frees "
                          "the lock all the same");
  }
  if (is_integer(reply, 0)) {
    handle_lost(lock, "an inner release found it no longer this owner's");
    throw LockLostError(lock->label() +
                        " was no longer this owner's at an inner release (its lease ran out or it was taken over); "
                        "the critical section may have overlapped another holder");
  }
  if (!is_hold_kept(reply) && !is_unacknowledged(reply)) {
    throw_reply_error(lock->key, names_for(lock->key), reply, "release");
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  // As for a re-entry: with lock.replica_acks only an acknowledged lease extends the validity.
  if (is_hold_kept(reply)) lock->extend_validity(sent, Millis(lock->lease_ms.load()));
}

void ServiceCore::release_final(const std::shared_ptr<HeldLock>& lock) {
  if (lock->own_release) return release_own(lock);
  const LockNames names = names_for(lock->key);
  // A waiter of this process asleep in line is alive: the release may grant it the lock outright.
  // Not with lock.replica_acks: a lock handed over here would not be
  // acknowledged by its new holder; the next in line acquires it, and WAITs.
  // Nor over a Redlock: a hand-off is one node's decision, and the nodes would each hand it to their own head.
  WaiterTable::Offer offer = scripts_.acknowledges() || scripts_.quorum() ? WaiterTable::Offer()
                                                                           : waiters_.offer(names.channel(), lock->owner);
  const std::string offer_arg =
      offer ? offer.owner() + ' ' + std::to_string(offer.lease_ms()) + ' ' +
                  (lock->handoffs_in_a_row < kMaxLocalHandoffsInARow ? '1' : '0')
            : std::string();
  const std::array<std::string_view, 3> args{lock->owner, line_settings_, offer_arg};
  const Clock::time_point sent = Clock::now();
  RedisReply reply;
  try {
    // Without an offer, the script's plain form: two arguments.
    reply = scripts_.run(kReleaseScript, names.script_keys(), offer ? std::span(args) : std::span(args).first(2));
    if (!transient_state(reply).empty()) {
      // Nothing ran. The offered waiter must not sit out the retries (its
      // wait bounds it by one command, see Ticket::wait): it tries by itself.
      offer.decline();
      reply = retry_release(*lock, std::move(reply), kReleaseScript, names.script_keys(), std::span(args).first(2));
    }
    throw_if_transient(lock->key, reply, "release");
  } catch (const ConnectionError& e) {
    throw ConnectionError(std::string(e.what()) + "; " + lock->label() +
                          " may not be released: if the release did not run, the lock expires by itself within its "
                          "lease (" + std::to_string(lock->lease_ms.load()) + " ms); if it did, it was freed or handed "
                          "to the next waiter");
  }
  // Released: the waiter told of its turn ('' if none), as text. Handed
  // over to the offered waiter: {token}. Not this acquisition's: 0.
  const bool released = reply.type == RedisReply::Type::String;
  const bool not_owner = is_integer(reply, 0);
  const std::optional<std::uint64_t> handed_token =
      offer && reply.type == RedisReply::Type::Array && reply.elements.size() == 1 ? token_of(reply.elements[0])
                                                                                  : std::nullopt;
  // Settle the offer first: the waiter must not sit out what follows (a
  // lost-lock hook runs user code). Without a grant, it tries by itself.
  if (handed_token) {
    offer.grant({*handed_token, sent, lock->handoffs_in_a_row + 1});
  } else {
    offer.decline();
  }
  if (!released && !not_owner && !handed_token) throw_reply_error(lock->key, names, reply, "release");
  if (not_owner) {
    handle_lost(lock, "release found it was no longer this owner's");
    throw LockLostError(lock->label() +
                        " was no longer this owner's when released (its lease ran out or it was taken over); the "
                        "new owner's lock was left untouched; the critical section may have overlapped another holder");
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  if (released && !reply.str.empty()) {
    // The next turn may be a waiter of this process: wake it now rather than after the notice's round trip.
    waiters_.notify(names.channel(), reply.str);
  }
}

void ServiceCore::release_current_thread(std::string_view key) {
  refuse_after_fork();
  std::shared_ptr<Hold> latest;
  {
    std::lock_guard guard(mutex_);
    auto it = held_.find(held_key(owner_token(), key));
    if (it != held_.end()) {
      for (auto weak = it->second->stack.rbegin(); weak != it->second->stack.rend() && !latest; ++weak) {
        auto live = weak->lock();
        if (live && !live->released.load()) latest = std::move(live);
      }
    }
  }
  if (!latest) {
    throw NotOwnerError("unlock(" + lock_label(key) +
                        "): the current thread holds no hold of it; nothing was changed in Redis. Release from the "
                        "thread that took it, or through its LockGuard");
  }
  release(*latest);
}

void ServiceCore::leave_line(const LockNames& names, const std::string& id) {
  // Best effort: a waiter left in line costs the others one turn window at most.
  try {
    const std::string window_arg = std::to_string(config_.turn_window.count());
    const std::array<std::string_view, 2> args{id, window_arg};
    scripts_.run(kLeaveScript, names.script_keys(), args);
  } catch (const Error& e) {
    logger_->debug("could not leave the line of '{}': {}", printable(names.lock()), e.what());
  }
}

std::uint64_t ServiceCore::fencing_token(const Hold& hold) {
  const std::shared_ptr<HeldLock>& lock = hold.lock;
  if (!scripts_.quorum() || lock->fence_raised.load()) return lock->fencing_token;
  std::unique_lock io(lock->io);
  if (lock->fence_raised.load()) return lock->fencing_token;
  const std::string lost_message = lock->label() +
                                   " was lost before its fencing token could be raised on a majority of the Redlock's "
                                   "nodes; the token must not be used: a later holder may hold a larger one";
  if (hold.released.load() || lock->is_lost()) throw LockLostError(lost_message);
  const LockNames names = names_for(lock->key);
  const std::string token = std::to_string(lock->fencing_token);
  const std::string retention = std::to_string(config_.fence_retention.count());
  const std::array<std::string_view, 2> keys{names.lock(), names.fence()};
  const std::array<std::string_view, 3> args{lock->owner, token, retention};
  RedisReply reply;
  try {
    reply = scripts_.run(kRaiseFenceScript, keys, args);
    throw_if_transient(lock->key, reply, "raise the fencing token");
  } catch (const ConnectionError& e) {
    throw ConnectionError(lock->label() + ": its fencing token could not be raised on a majority of the "
                          "Redlock's nodes, so it is not handed out; try again: " + std::string(e.what()));
  }
  if (is_integer(reply, 1)) {
    lock->fence_raised = true;
    return lock->fencing_token;
  }
  if (is_integer(reply, 0)) {
    io.unlock();
    handle_lost(lock, "raising its fencing token found it held by no majority");
    throw LockLostError(lost_message);
  }
  throw_reply_error(lock->key, names, reply, "raise the fencing token");
}

int ServiceCore::hold_count(std::string_view key) const {
  std::lock_guard guard(mutex_);
  auto it = held_.find(held_key(owner_token(), key));
  if (it == held_.end() || it->second->is_lost()) return 0;
  return it->second->holds;
}

void ServiceCore::set_on_lost(std::function<void(const std::string&)> hook) {
  // Its thread starts now, not at the first loss, when every millisecond counts.
  if (hook) notifier_.start();
  std::lock_guard guard(mutex_);
  on_lost_ = std::move(hook);
}

void ServiceCore::handle_lost(const std::shared_ptr<HeldLock>& lock, const std::string& why) {
  if (lock->lost_flag.exchange(true)) return;
  stats_.lost.fetch_add(1, std::memory_order_relaxed);
  lock->stop.request_stop();
  watchdog_.unwatch(*lock);
  logger_->error("{} lost by owner {}: {}; its holder may now overlap another holder and should stop (fencing token {})",
                 lock->label(), lock->owner, why, lock->fencing_token);
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard guard(mutex_);
    hook = on_lost_;
  }
  // On a thread of its own: a slow hook delays neither renewals nor other locks' loss.
  if (hook) notifier_.post(std::move(hook), lock->key);
}

}  // namespace detail

RedisLockService::RedisLockService(std::shared_ptr<RedisExecutor> redis, LockConfig config,
                                   std::shared_ptr<spdlog::logger> logger) {
  if (!redis) throw InvalidArgument("RedisLockService needs a RedisExecutor; got a null pointer");
  core_ = std::make_shared<detail::ServiceCore>(std::move(redis), std::move(config), std::move(logger));
  core_->start();
}

RedisLockService::~RedisLockService() = default;

LockGuard RedisLockService::lock(std::string_view key, LockOptions options) {
  const auto core = core_;
  return core->acquire(key, options, true);
}

LockGuard RedisLockService::try_lock(std::string_view key, LockOptions options) {
  // Without a wait, once: as std::mutex::try_lock and Redisson's tryLock().
  if (!options.wait) options.wait = Millis(0);
  const auto core = core_;
  return core->acquire(key, options, false);
}

LockGuard RedisLockService::read_lock(std::string_view key, LockOptions options) {
  const auto core = core_;
  return core->acquire_shared({detail::SharedKind::read, key}, options, true);
}

LockGuard RedisLockService::write_lock(std::string_view key, LockOptions options) {
  const auto core = core_;
  return core->acquire_shared({detail::SharedKind::write, key}, options, true);
}

LockGuard RedisLockService::try_read_lock(std::string_view key, LockOptions options) {
  if (!options.wait) options.wait = Millis(0);
  const auto core = core_;
  return core->acquire_shared({detail::SharedKind::read, key}, options, false);
}

LockGuard RedisLockService::try_write_lock(std::string_view key, LockOptions options) {
  if (!options.wait) options.wait = Millis(0);
  const auto core = core_;
  return core->acquire_shared({detail::SharedKind::write, key}, options, false);
}

Semaphore RedisLockService::semaphore(std::string_view name, long long permits) {
  core_->validate(name, {});
  if (permits < 1 || permits > detail::kMaxPermits) {
    throw InvalidArgument(detail::labelled("semaphore", name) + ": created with " + std::to_string(permits) +
                          " permits; give it 1 to " + std::to_string(detail::kMaxPermits) +
                          " (set_permits may lower it to 0 later)");
  }
  return Semaphore(core_, std::string(name), permits);
}

Semaphore RedisLockService::semaphore(std::string_view name) {
  core_->validate(name, {});
  return Semaphore(core_, std::string(name), 0);
}

void RedisLockService::unlock(std::string_view key) { core_->release_current_thread(key); }

bool RedisLockService::held_by_current_thread(std::string_view key) const { return core_->hold_count(key) > 0; }

int RedisLockService::hold_count(std::string_view key) const { return core_->hold_count(key); }

void RedisLockService::on_lost(std::function<void(const std::string& key)> hook) { core_->set_on_lost(std::move(hook)); }

std::size_t RedisLockService::watched_locks() const { return core_->watched_locks(); }

LockStats RedisLockService::stats() const { return core_->stats(); }

}  // namespace dlock
