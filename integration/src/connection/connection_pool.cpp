// The pool's borrow and return: idle connections checked for a close by the server, new ones up
// to pool_size, a wait bounded by the command timeout, and a fork child's inherited ones dropped.
#include "dlock/connection_pool.hpp"

#include <chrono>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// A connection the server closed while it sat idle (restart, CLIENT KILL,
// idle timeout). Checking costs one poll() and spares the caller a failed
// command that was never its fault.
bool closed_while_idle(RedisConnection& connection) { return connection.broken() || connection.closed_while_idle(); }

}  // namespace

ConnectionPool::ConnectionPool(RedisConfig config) : config_(std::move(config)), generation_(fork_generation()) {
  // Another thread may hold mutex_ when this process forks; the child must not inherit it locked.
  hold_across_fork(mutex_);
}

ConnectionPool::~ConnectionPool() { release_across_fork(mutex_); }

std::vector<std::unique_ptr<RedisConnection>> ConnectionPool::take_inherited() {
  std::vector<std::unique_ptr<RedisConnection>> inherited;
  if (generation_ == fork_generation()) return inherited;
  // Connections lent out at the fork belong to parent threads that do not
  // exist here and will never come back: they no longer count.
  inherited.swap(idle_);
  open_ = 0;
  generation_ = fork_generation();
  return inherited;
}

std::string ConnectionPool::endpoint() const { return config_.host + ":" + std::to_string(config_.port); }

ConnectionPool::Lease ConnectionPool::borrow() {
  const auto deadline = std::chrono::steady_clock::now() + config_.command_timeout;
  std::unique_lock lock(mutex_);
  if (auto inherited = take_inherited(); !inherited.empty()) {
    lock.unlock();
    inherited.clear();  // closes the sockets; a connection of another process sends nothing
    lock.lock();
  }
  for (;;) {
    while (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      // The check is a syscall: make it without the mutex, so borrowers on other threads are not serialised.
      lock.unlock();
      if (!closed_while_idle(*connection)) return Lease(*this, std::move(connection));
      connection.reset();
      lock.lock();
      --open_;
    }
    if (open_ < config_.pool_size) {
      // Reserve the slot, then connect without the mutex so other borrowers
      // and returns are not held up by a slow or unreachable server.
      ++open_;
      lock.unlock();
      try {
        auto connection = std::make_unique<RedisConnection>(config_);
        opened_.fetch_add(1, std::memory_order_acq_rel);
        return Lease(*this, std::move(connection));
      } catch (...) {
        lock.lock();
        --open_;
        returned_.notify_one();
        throw;
      }
    }
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= config_.pool_size) {
      throw ConnectionError("redis " + endpoint() + ": connection pool exhausted (pool_size " +
                            std::to_string(config_.pool_size) + ", none returned within " +
                            std::to_string(config_.command_timeout.count()) +
                            " ms); raise redis.pool_size or hold connections for less time",
                            false);  // nothing was sent
    }
  }
}

void ConnectionPool::give_back(std::unique_ptr<RedisConnection> connection) {
  if (connection->broken()) {
    connection.reset();  // closes the socket outside the mutex
    std::lock_guard lock(mutex_);
    if (open_ > 0) --open_;  // 0: lent out before a fork, already forgotten
  } else {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(connection));
  }
  returned_.notify_one();
}

ConnectionPool::Lease::Lease(ConnectionPool& pool, std::unique_ptr<RedisConnection> connection)
    : pool_(&pool), connection_(std::move(connection)) {}

ConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), connection_(std::move(other.connection_)) {}

ConnectionPool::Lease::~Lease() {
  if (connection_) pool_->give_back(std::move(connection_));
}

}  // namespace dlock::detail
