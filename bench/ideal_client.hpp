#pragma once
// The floor: an ideal client that sends dlock's own acquire and release
// scripts by raw hiredis EVALSHA on one connection, with no library code
// around them. Also measures the bare round trip and runs the GET/SET
// critical section of the contention parts.

#include <hiredis/hiredis.h>

#include <string>

namespace bench {

class IdealClient {
 public:
  IdealClient(const std::string& host, int port);
  ~IdealClient();
  IdealClient(const IdealClient&) = delete;
  IdealClient& operator=(const IdealClient&) = delete;

  void round_trip();                                        // EVALSHA of "return 1"
  // key is the lock's full Redis name ("dlock:{K}"); the other names derive from it as dlock's do.
  // owner is the acquisition id. A first acquisition and its final release:
  bool acquire(const std::string& key, const std::string& owner, long long lease_ms);
  void release(const std::string& key, const std::string& owner);
  // Re-entry and inner release: the renew script setting the hold count.
  void set_holds(const std::string& key, const std::string& owner, long long lease_ms, int holds);
  void increment(const std::string& counter_key);           // GET, then SET value+1: not atomic
  long long get(const std::string& key);

 private:
  redisReply* call(int argc, const char** argv, const size_t* lens);
  std::string load(const std::string& source);

  redisContext* context_;
  std::string noop_sha_, acquire_sha_, release_sha_, renew_sha_;
};

}  // namespace bench
