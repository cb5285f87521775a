#include "dlock/lock_service.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <span>
#include <thread>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/owner_token.hpp"

namespace dlock {
namespace detail {
namespace {

// A lock whose hash has no expiry (PERSISTed by hand) gives no PTTL to sleep
// on: retry on this period instead.
constexpr Millis kNoLeaseRetry{100};
// A waiter in line wakes on the notice naming it; it also re-checks on this
// period, in case the waiter whose turn it was died without taking the lock.
constexpr Millis kLinePoll{500};
// How long a final release keeps the free lock for the waiter whose turn it is.
constexpr Millis kTurnWindow{200};
// While Redis is unreachable, a waiting lock() tries again on this period.
constexpr Millis kOutageRetry{100};
// A releasing thread may grant the lock straight to a waiter of its own
// process, saving that waiter a round trip. In line order that is always
// fair; ahead of older waiters of other processes it is allowed only while
// the lock has passed within this process fewer than this many times in a
// row, so the oldest waiter in line is passed over at most this many times.
constexpr int kMaxLocalHandoffsInARow = 3;

std::shared_ptr<spdlog::logger> default_logger() {
  if (auto logger = spdlog::get("dlock")) return logger;
  return spdlog::default_logger();
}

}  // namespace

ServiceCore::ServiceCore(std::shared_ptr<RedisExecutor> redis, LockConfig config,
                         std::shared_ptr<spdlog::logger> logger)
    : redis_(std::move(redis)),
      config_(std::move(config)),
      logger_(logger ? std::move(logger) : default_logger()),
      instance_id_(random_instance_id()),
      scripts_(*redis_),
      waiters_(*redis_),
      watchdog_(scripts_, stats_, logger_, [this](const std::shared_ptr<HeldLock>& lock, const std::string& why) {
        handle_lost(lock, why);
      }) {
  if (config_.watchdog_timeout <= Millis(0)) {
    throw InvalidArgument("lock.watchdog_timeout_ms is " + std::to_string(config_.watchdog_timeout.count()) +
                          "; it must be a positive number of milliseconds (default 30000)");
  }
  if (config_.wait < Millis(0)) {
    throw InvalidArgument("lock.wait_ms is " + std::to_string(config_.wait.count()) +
                          "; it must be 0 (try once) or a positive number of milliseconds");
  }
  if (config_.max_key_bytes == 0) {
    throw InvalidArgument("lock.max_key_bytes is 0; it must be at least 1 (default 1024)");
  }
  scripts_.load_all();
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

void ServiceCore::validate(std::string_view key, const LockOptions& options) const {
  if (key.empty()) throw InvalidArgument("lock key is empty; pass a non-empty key such as \"stock:42\"");
  if (key.size() > config_.max_key_bytes) {
    throw InvalidArgument(lock_label(key) + ": key is " + std::to_string(key.size()) +
                          " bytes, longer than lock.max_key_bytes (" + std::to_string(config_.max_key_bytes) +
                          "); use a shorter key or raise lock.max_key_bytes");
  }
  if (options.wait && *options.wait < Millis(0)) {
    throw InvalidArgument(lock_label(key) + ": wait of " + std::to_string(options.wait->count()) +
                          " ms is negative; pass 0 to try once, or a positive wait");
  }
  if (options.lease && *options.lease <= Millis(0)) {
    throw InvalidArgument(lock_label(key) + ": lease of " + std::to_string(options.lease->count()) +
                          " ms is not positive; pass a positive lease, or none to let the watchdog renew it");
  }
}

void ServiceCore::throw_reply_error(std::string_view key, const LockNames& names, const RedisReply& reply,
                                    std::string_view during) const {
  if (reply.is_error() && reply.str.find(kWrongTypeError) != std::string::npos) {
    throw RedisError(lock_label(key) + ": cannot " + std::string(during) + ": Redis key '" + printable(names.lock()) +
                     "' (or its fencing counter) holds data that is not a dlock lock (" + reply.str +
                     "); another program uses that name: delete it or choose another lock.key_prefix");
  }
  throw RedisError(lock_label(key) + ": cannot " + std::string(during) + ": redis " + redis_->endpoint() +
                   " answered " + (reply.is_error() ? reply.str : std::string("an unexpected reply")) +
                   "; check that the Redis user may run EVALSHA on keys with prefix '" + config_.key_prefix + "'");
}

LockGuard ServiceCore::acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout) {
  // A waiter may sleep for seconds: keep this alive even if the service object is dropped meanwhile.
  const std::shared_ptr<ServiceCore> self = shared_from_this();
  validate(key, options);
  const Millis wait = options.wait.value_or(config_.wait);
  const bool renewed = !options.lease.has_value();
  const Millis lease = options.lease.value_or(config_.watchdog_timeout);
  const LockNames names = names_for(key);
  const std::string owner = owner_token();
  const std::string held = held_key(owner, key);
  const std::array<std::string_view, 4> script_keys{names.lock(), names.fence(), names.queue(), names.turn()};
  const std::string lease_arg = std::to_string(lease.count());
  const Clock::time_point called = Clock::now();
  const Clock::time_point deadline = called + wait;

  WaiterTable::Ticket ticket;
  long long last_nap_ms = 0;
  for (;;) {
    const Clock::time_point sent = Clock::now();
    const Millis wait_left = std::max(Millis(0), std::chrono::ceil<Millis>(deadline - sent));
    RedisReply reply;
    try {
      const std::string wait_arg = std::to_string(wait_left.count());
      const std::string holds_arg = std::to_string(known_holds(held));
      const std::array<std::string_view, 4> args{owner, lease_arg, wait_arg, holds_arg};
      reply = scripts_.run(kAcquireScript, script_keys, args);
    } catch (const ConnectionError&) {
      // An outage shorter than the wait is waited out; a reply lost to it is
      // harmless, since the next try adopts a hold it may have left.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) throw;
      const Millis nap = std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline - now));
      if (ticket) {
        // The subscriber's reconnect notice ends it early.
        if (auto direct = ticket.wait(nap)) {
          return grant_direct(key, names, owner, held, *direct, lease, renewed, called);
        }
      } else {
        std::this_thread::sleep_for(nap);
      }
      continue;
    }
    if (reply.is_error() || reply.type != RedisReply::Type::Array || reply.elements.size() < 2 ||
        reply.elements[0].type != RedisReply::Type::Integer) {
      throw_reply_error(key, names, reply, "acquire");
    }
    if (reply.elements[0].integer == 1 && reply.elements.size() >= 3 &&
        reply.elements[2].type == RedisReply::Type::String) {
      return grant(key, names, owner, held, reply.elements[1].integer, std::stoull(reply.elements[2].str), lease,
                   renewed, sent, called);
    }
    last_nap_ms = reply.elements[1].integer;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    if (!ticket) {
      // Listen before the next try, so a release between the two cannot go unheard.
      stats_.contended.fetch_add(1, std::memory_order_relaxed);
      waiters_.enter(names.channel(), owner, lease.count(), ticket);
      continue;
    }
    // Never sleep past the holder's lease (a crashed holder publishes nothing)
    // nor past the line's poll period (a waiter whose turn it was may have died).
    const Millis nap = last_nap_ms > 0 ? Millis(last_nap_ms + 1) : last_nap_ms == -2 ? Millis(0) : kNoLeaseRetry;
    if (auto direct = ticket.wait(std::min({nap, kLinePoll, std::chrono::ceil<Millis>(deadline - now)}))) {
      return grant_direct(key, names, owner, held, *direct, lease, renewed, called);
    }
  }
  if (ticket) leave_line(names, owner);
  stats_.timeouts.fetch_add(1, std::memory_order_relaxed);
  if (!throw_on_timeout) return {};
  throw LockTimeoutError(lock_label(key) + ": not acquired within " + std::to_string(wait.count()) +
                         " ms; another owner holds it (lease left " + std::to_string(last_nap_ms) +
                         " ms); wait longer (LockOptions::wait or lock.wait_ms) or use try_lock");
}

LockGuard ServiceCore::grant_direct(std::string_view key, const LockNames& names, const std::string& owner,
                                    const std::string& held, const WaiterTable::DirectGrant& direct, Millis lease,
                                    bool renewed, Clock::time_point called) {
  stats_.handed_over.fetch_add(1, std::memory_order_relaxed);
  return grant(key, names, owner, held, 1, direct.fencing_token, lease, renewed, direct.sent, called,
               direct.handoffs_in_a_row);
}

LockGuard ServiceCore::grant(std::string_view key, const LockNames& names, const std::string& owner,
                             const std::string& held, long long holds, std::uint64_t fencing_token, Millis lease,
                             bool renewed, Clock::time_point sent, Clock::time_point called, int handoffs_in_a_row) {
  std::shared_ptr<HeldLock> lock;
  std::shared_ptr<HeldLock> stale;
  std::shared_ptr<Hold> hold;
  bool watch = false;
  {
    std::lock_guard guard(mutex_);
    std::shared_ptr<HeldLock>& slot = held_[held];
    if (slot && !slot->lost_flag.load() && holds > 1) {
      // Re-entry: one more hold on the lock this owner already has.
      stats_.reentered.fetch_add(1, std::memory_order_relaxed);
      lock = slot;
      ++lock->holds;
      if (renewed && !lock->renewed.exchange(true)) {
        lock->lease_ms = lease.count();
        watch = true;
      } else if (!lock->renewed.load()) {
        lock->lease_ms = std::max<std::int64_t>(lock->lease_ms.load(), lease.count());
      }
      lock->extend_validity(sent, lease);
    } else {
      // Redis granted the lock afresh: a record we still had is stale (it expired unnoticed).
      if (slot && !slot->lost_flag.load()) stale = slot;
      stats_.acquired.fetch_add(1, std::memory_order_relaxed);
      lock = std::make_shared<HeldLock>(std::string(key), std::string(names.lock()), owner, held, fencing_token);
      lock->renewed = renewed;
      lock->lease_ms = lease.count();
      lock->holds = 1;
      lock->handoffs_in_a_row = handoffs_in_a_row;
      lock->extend_validity(sent, lease);
      slot = lock;
      watch = true;
    }
    hold = std::make_shared<Hold>(lock);
    lock->stack.push_back(hold);
  }
  if (stale) handle_lost(stale, "Redis granted the lock afresh to the same thread, so the earlier hold had expired");
  if (watch) watchdog_.watch(lock, sent);
  stats_.record_acquire_latency(Clock::now() - called);
  return LockGuard(shared_from_this(), std::move(hold));
}

void ServiceCore::release(Hold& hold, Release how) {
  if (hold.released.exchange(true)) return;
  const std::shared_ptr<HeldLock>& lock = hold.lock;
  bool final = false;
  {
    std::lock_guard guard(mutex_);
    --lock->holds;
    std::erase_if(lock->stack, [&hold](const std::weak_ptr<Hold>& weak) {
      auto live = weak.lock();
      return !live || live.get() == &hold;
    });
    final = lock->holds == 0;
    if (final) {
      auto it = held_.find(lock->held_key);
      if (it != held_.end() && it->second == lock) held_.erase(it);
    }
  }
  // Before the release is sent, so no renewal can re-extend a released lock.
  if (final) watchdog_.unwatch(*lock);
  if (how == Release::locally_only) return;
  if (lock->lost_flag.load()) {
    throw LockLostError(lock_label(lock->key) +
                        " was lost before this release (its lease ran out or it was taken over); Redis was left "
                        "untouched; the critical section may have overlapped another holder");
  }
  const LockNames names = names_for(lock->key);
  const std::string lease_arg = std::to_string(lock->lease_ms.load());
  const std::string window_arg = std::to_string(kTurnWindow.count());
  // A waiter of this process asleep in line is alive: the release may grant it the lock outright.
  WaiterTable::Offer offer = final ? waiters_.offer(names.channel(), lock->owner) : WaiterTable::Offer{};
  const std::string candidate_lease_arg = offer ? std::to_string(offer.lease_ms()) : std::string();
  const std::array<std::string_view, 5> keys{names.lock(), names.channel(), names.queue(), names.turn(), names.fence()};
  const std::array<std::string_view, 6> args{
      lock->owner, lease_arg, window_arg, offer ? std::string_view(offer.owner()) : std::string_view(),
      candidate_lease_arg, lock->handoffs_in_a_row < kMaxLocalHandoffsInARow ? "1" : "0"};
  const Clock::time_point sent = Clock::now();
  RedisReply reply;
  try {
    // Without an offer, the script's plain form: four keys, three arguments.
    reply = offer ? scripts_.run(kReleaseScript, keys, args)
                  : scripts_.run(kReleaseScript, std::span(keys).first(4), std::span(args).first(3));
  } catch (const ConnectionError& e) {
    throw ConnectionError(std::string(e.what()) + "; " + lock_label(lock->key) +
                          " may not be released: if the release did not run, the lock expires by itself within its "
                          "lease (" + std::to_string(lock->lease_ms.load()) + " ms); if it did, it was freed or handed "
                          "to the next waiter");
  }
  // Settle the offer first: the waiter must not sit out what follows (a
  // lost-lock hook runs user code). Without a grant, it tries by itself.
  const bool handed_over = offer && reply.type == RedisReply::Type::Array && reply.elements.size() >= 4 &&
                           reply.elements[0].type == RedisReply::Type::Integer && reply.elements[0].integer == 0 &&
                           reply.elements[3].type == RedisReply::Type::String && !reply.elements[3].str.empty() &&
                           reply.elements[2].str == offer.owner();
  if (handed_over) {
    offer.grant({std::stoull(reply.elements[3].str), sent, lock->handoffs_in_a_row + 1});
  } else {
    offer.decline();
  }
  if (reply.is_error() || reply.type != RedisReply::Type::Array || reply.elements.size() < 3 ||
      reply.elements[0].type != RedisReply::Type::Integer) {
    throw_reply_error(lock->key, names, reply, "release");
  }
  const long long status = reply.elements[0].integer;
  if (status < 0) {
    handle_lost(lock, "release found it was no longer this owner's");
    throw LockLostError(lock_label(lock->key) +
                        " was no longer this owner's when released (its lease ran out or it was taken over); the "
                        "new owner's lock was left untouched; the critical section may have overlapped another holder");
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  if (status > 0) {
    lock->extend_validity(sent, Millis(lock->lease_ms.load()));
  } else if (!handed_over && !reply.elements[2].str.empty()) {
    // The next turn may be a waiter of this process: wake it now rather than after the notice's round trip.
    waiters_.notify(names.channel(), reply.elements[2].str);
  }
}

void ServiceCore::release_current_thread(std::string_view key) {
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

int ServiceCore::known_holds(const std::string& held) const {
  std::lock_guard guard(mutex_);
  auto it = held_.find(held);
  return it == held_.end() || it->second->lost_flag.load() ? 0 : it->second->holds;
}

void ServiceCore::leave_line(const LockNames& names, const std::string& owner) {
  // Best effort: a waiter left in line costs the others one turn window at most.
  try {
    const std::string window_arg = std::to_string(kTurnWindow.count());
    const std::array<std::string_view, 4> keys{names.queue(), names.turn(), names.channel(), names.lock()};
    const std::array<std::string_view, 2> args{owner, window_arg};
    scripts_.run(kLeaveScript, keys, args);
  } catch (const Error& e) {
    logger_->debug("could not leave the line of '{}': {}", printable(names.lock()), e.what());
  }
}

int ServiceCore::hold_count(std::string_view key) const {
  std::lock_guard guard(mutex_);
  auto it = held_.find(held_key(owner_token(), key));
  if (it == held_.end() || it->second->is_lost()) return 0;
  return it->second->holds;
}

void ServiceCore::set_on_lost(std::function<void(const std::string&)> hook) {
  std::lock_guard guard(mutex_);
  on_lost_ = std::move(hook);
}

void ServiceCore::handle_lost(const std::shared_ptr<HeldLock>& lock, const std::string& why) {
  if (lock->lost_flag.exchange(true)) return;
  stats_.lost.fetch_add(1, std::memory_order_relaxed);
  lock->stop.request_stop();
  watchdog_.unwatch(*lock);
  logger_->error("{} lost by owner {}: {}; its holder may now overlap another holder and should stop (fencing token {})",
                 lock_label(lock->key), lock->owner, why, lock->fencing_token);
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard guard(mutex_);
    hook = on_lost_;
  }
  if (!hook) return;
  try {
    hook(lock->key);
  } catch (const std::exception& e) {
    logger_->error("on_lost hook for {} threw: {}", lock_label(lock->key), e.what());
  } catch (...) {
    logger_->error("on_lost hook for {} threw a non-standard exception", lock_label(lock->key));
  }
}

}  // namespace detail

RedisLockService::RedisLockService(std::shared_ptr<RedisExecutor> redis, LockConfig config,
                                   std::shared_ptr<spdlog::logger> logger) {
  if (!redis) throw InvalidArgument("RedisLockService needs a RedisExecutor; got a null pointer");
  core_ = std::make_shared<detail::ServiceCore>(std::move(redis), std::move(config), std::move(logger));
}

RedisLockService::~RedisLockService() = default;

LockGuard RedisLockService::lock(std::string_view key, LockOptions options) {
  const auto core = core_;
  return core->acquire(key, options, true);
}

LockGuard RedisLockService::try_lock(std::string_view key, LockOptions options) {
  const auto core = core_;
  return core->acquire(key, options, false);
}

void RedisLockService::unlock(std::string_view key) { core_->release_current_thread(key); }

bool RedisLockService::held_by_current_thread(std::string_view key) const { return core_->hold_count(key) > 0; }

int RedisLockService::hold_count(std::string_view key) const { return core_->hold_count(key); }

void RedisLockService::on_lost(std::function<void(const std::string& key)> hook) { core_->set_on_lost(std::move(hook)); }

std::size_t RedisLockService::watched_locks() const { return core_->watched_locks(); }

LockStats RedisLockService::stats() const { return core_->stats(); }

}  // namespace dlock
