#pragma once
// The minimal reentrant pair: the least a reentrant, fenced hash lock asks of
// Redis, as two Lua scripts sent by raw hiredis EVALSHA on one connection.
// It is the reference for what dlock's scripts cost the server (dlock adds a
// fair line, wrong-type safety and per-acquisition identity on top); it has
// no line, no watchdog and no wrong-type checks, so it is not a lock to use.
//
// One client is one connection: use it from one thread at a time.

#include <string>

#include "raw_connection.hpp"

namespace bench {

class MinimalPairClient {
 public:
  // Connects and loads both scripts. Throws std::runtime_error if redis at
  // host:port cannot be reached.
  MinimalPairClient(const std::string& host, int port);

  // Takes lock_key for owner, or takes it once more if owner holds it already;
  // either way its lease restarts at lease_ms. A first acquisition draws a
  // fencing token (INCR fence_key). Returns false, leaving Redis unchanged,
  // if another owner holds it. lock_key and fence_key should share a hash tag.
  bool acquire(const std::string& lock_key, const std::string& fence_key, const std::string& owner,
               long long lease_ms);
  // Gives back one of owner's holds on lock_key. With holds left the lease
  // restarts at lease_ms; the last one deletes the lock and PUBLISHes on
  // channel. Returns the holds left (0: released), or -1 if owner did not
  // hold lock_key (then Redis is unchanged).
  long long release(const std::string& lock_key, const std::string& channel, const std::string& owner,
                    long long lease_ms);

 private:
  RawConnection connection_;
  std::string acquire_sha_, release_sha_;
};

}  // namespace bench
