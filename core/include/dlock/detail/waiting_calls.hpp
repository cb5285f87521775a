#pragma once
// The acquire calls of a service that wait now, by key: the `waiting` gauge
// of stats(). A call counts from its first busy answer until it is granted,
// gives up or is abandoned; a Mark held by the call ends its count however
// the call ends.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

class WaitingCalls {
 public:
  // One waiting call's count: taken by start(), given back by stop() or the destructor.
  class Mark {
   public:
    Mark() = default;
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;
    ~Mark() { stop(); }

    // Counts the call as waiting on `key` (once; later calls do nothing).
    void start(WaitingCalls& calls, std::string_view key);
    void stop();

   private:
    WaitingCalls* calls_ = nullptr;  // set while counted
    std::string key_;
  };

  // {key, calls waiting on it}, for the keys any call waits on now. Thread-safe.
  std::vector<std::pair<std::string, std::uint64_t>> by_key() const;

 private:
  void enter(const std::string& key);
  void leave(const std::string& key);

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::uint64_t> by_key_;  // guarded by mutex_; no key at 0
};

}  // namespace dlock::detail
