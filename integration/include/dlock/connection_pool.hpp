#pragma once
// A bounded pool of RedisConnections. Connections are made on demand up to
// redis.pool_size; a connection that broke is dropped, never returned, and
// replaced by a fresh one on the next borrow.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "dlock/redis_connection.hpp"

namespace dlock::detail {

class ConnectionPool {
 public:
  explicit ConnectionPool(RedisConfig config);

  class Lease {  // a borrowed connection; returns it (or drops it if broken) on destruction
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<RedisConnection> connection);
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    RedisConnection& operator*() { return *connection_; }
    RedisConnection* operator->() { return connection_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<RedisConnection> connection_;
  };

  // Blocks while all pool_size connections are lent out, at most the command
  // timeout (then ConnectionError saying the pool is exhausted and to raise
  // redis.pool_size). Throws ConnectionError if a new connection cannot be made.
  Lease borrow();

  const RedisConfig& config() const { return config_; }
  std::string endpoint() const;

 private:
  void give_back(std::unique_ptr<RedisConnection> connection);

  const RedisConfig config_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<RedisConnection>> idle_;  // guarded by mutex_
  std::size_t open_ = 0;                                // guarded by mutex_: idle + lent out
};

}  // namespace dlock::detail
