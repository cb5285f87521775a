#pragma once
// A bounded pool of RedisConnections. Connections are made on demand up to
// redis.pool_size; a connection that broke is dropped, never returned, and
// replaced by a fresh one on the next borrow.
//
// fork(): a child never uses a connection its parent made (the socket is
// shared, so each would read the other's replies). Its first borrow drops the
// inherited connections, sending nothing on them, and opens fresh ones.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "dlock/redis_connection.hpp"

namespace dlock::detail {

class ConnectionPool {
 public:
  explicit ConnectionPool(RedisConfig config);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  class Lease {  // a borrowed connection; returns it (or drops it if broken) on destruction
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<RedisConnection> connection);
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    RedisConnection& operator*() { return *connection_; }
    RedisConnection* operator->() { return connection_.get(); }
    const RedisConnection* operator->() const { return connection_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<RedisConnection> connection_;
  };

  // Blocks while all pool_size connections are lent out, at most the command
  // timeout (then ConnectionError saying the pool is exhausted and to raise
  // redis.pool_size). Throws ConnectionError if a new connection cannot be made.
  Lease borrow();

  const RedisConfig& config() const { return config_; }
  // Connections opened so far (see HiredisExecutor::connections_opened).
  std::uint64_t opened() const { return opened_.load(std::memory_order_acquire); }
  std::string endpoint() const;

 private:
  void give_back(std::unique_ptr<RedisConnection> connection);
  // In a fork child: forgets the parent's connections. Called with mutex_ held.
  std::vector<std::unique_ptr<RedisConnection>> take_inherited();

  const RedisConfig config_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<RedisConnection>> idle_;  // guarded by mutex_
  std::size_t open_ = 0;                                // guarded by mutex_: idle + lent out
  std::atomic<std::uint64_t> opened_{0};
  unsigned generation_;                                 // guarded by mutex_: fork_generation() of open_
};

}  // namespace dlock::detail
