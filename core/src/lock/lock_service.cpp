// The lock service's construction and public surface: ServiceCore's set-up,
// identities and checks of keys and replies, and RedisLockService's members.
#include "dlock/lock_service.hpp"

#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "dlock/detail/server_checks.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/detail/key_label.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/owner_token.hpp"
#include "dlock/detail/event_loop_check.hpp"

namespace dlock {
namespace detail {
namespace {

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
      line_settings_(std::to_string(config_.turn_window.count()) + ' ' +
                     std::to_string(config_.fence_retention.count())),
      fork_generation_(fork_generation()),
      scripts_(*redis_, ReplicaAcknowledgement{config_.replica_acks, config_.replica_ack_timeout}),
      waiters_(*redis_),
      key_prefix_series_(config_.metrics),
      notifier_(*logger_),
      watchdog_(*redis_, scripts_, stats_, logger_) {
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
  // Releases still in flight reach Redis, and their replies are read, before anything they use goes.
  if (fork_generation() == fork_generation_) deferred_.drain();
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

std::string ServiceCore::owner_token(const std::optional<Owner>& owner) const {
  std::string token;
  token.reserve(instance_id_.size() + 17);
  token.append(instance_id_).append(1, ':');
  return owner ? token.append(owner_hex(owner->value())) : token.append(current_thread_id());
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

void ServiceCore::refuse_thread_owner_on_event_loop(std::string_view label, const LockOptions& options) {
  if (options.owner || !on_event_loop_thread()) return;
  throw InvalidArgument(std::string(label) +
                        ": a blocking acquisition on a thread that runs an Asio event loop (io_context::run, a "
                        "thread_pool), owned by the thread: every coroutine on this thread would re-enter it, so "
                        "it would exclude none of them, and its wait would stall the loop. Use co_await "
                        "dlock::async_lock(...) (<dlock/asio.hpp>), or pass LockOptions::owner (an Owner per task) "
                        "to block this thread on purpose");
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

int ServiceCore::hold_count(std::string_view key, const std::optional<Owner>& owner) const {
  const std::string held = held_key(owner_token(owner), key);
  std::lock_guard guard(mutex_);
  auto it = held_.find(held);
  if (it == held_.end() || it->second->is_lost()) return 0;
  return it->second->holds;
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

void RedisLockService::unlock(std::string_view key) { core_->release_latest(key, std::nullopt); }

void RedisLockService::unlock(std::string_view key, Owner owner) { core_->release_latest(key, owner); }

bool RedisLockService::held_by_current_thread(std::string_view key) const {
  return core_->hold_count(key, std::nullopt) > 0;
}

bool RedisLockService::held_by(std::string_view key, Owner owner) const { return core_->hold_count(key, owner) > 0; }

int RedisLockService::hold_count(std::string_view key) const { return core_->hold_count(key, std::nullopt); }

int RedisLockService::hold_count(std::string_view key, Owner owner) const { return core_->hold_count(key, owner); }

void RedisLockService::on_lost(std::function<void(const std::string& key)> hook) { core_->set_on_lost(std::move(hook)); }

std::size_t RedisLockService::watched_locks() const { return core_->watched_locks(); }

LockStats RedisLockService::stats() const { return core_->stats(); }

std::shared_ptr<detail::AsyncOperation> RedisLockService::start_async(detail::AsyncRequest request,
                                                                      detail::AsyncDone done) {
  // The try forms try once unless given a wait, as their blocking twins.
  if (!request.throw_on_timeout && !request.options.wait) request.options.wait = Millis(0);
  // Without an owner, each async acquisition is its own: never one by the thread it happens to start on.
  if (!request.options.owner) request.options.owner = Owner::create();
  return core_->acquire_async(std::move(request), std::move(done));
}

}  // namespace dlock
