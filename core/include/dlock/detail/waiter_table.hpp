#pragma once
// The local waiters of busy locks, per release channel. The first waiter of a
// channel subscribes to it (through the executor's one shared subscriber
// connection); the last one to leave unsubscribes. A release notice names the
// owner whose turn it is: only that waiter wakes, so a release does not
// stampede every local waiter at Redis. A notice that names nobody (no one
// was in line, or the subscriber reconnected) wakes the oldest local waiter;
// a waiter that leaves holding such an unused notice passes it on.

#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dlock/lock_options.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

class WaiterTable {
 public:
  explicit WaiterTable(RedisExecutor& redis);
  ~WaiterTable();
  WaiterTable(const WaiterTable&) = delete;
  WaiterTable& operator=(const WaiterTable&) = delete;

  struct Waiter;
  struct Channel;
  struct State;

  // A waiter's place in line; leaving (destruction) passes an unused notice on.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(std::shared_ptr<State> state, Channel* channel, std::list<Waiter>::iterator self);
    Ticket(Ticket&&) = delete;
    ~Ticket();
    explicit operator bool() const { return state_ != nullptr; }

    // Sleeps until a release notice for this channel reaches this waiter, or
    // for `at_most`. Returns true if woken by a notice.
    bool wait(Millis at_most);

   private:
    friend class WaiterTable;
    std::shared_ptr<State> state_;
    Channel* channel_ = nullptr;
    std::list<Waiter>::iterator self_;
  };

  // Joins the line of `channel` as `owner`, subscribing first if this is its
  // first waiter. Returns once the subscription is confirmed or could not be
  // (then the waiter relies on its timed retries alone).
  void enter(const std::string& channel, const std::string& owner, Ticket& ticket);

  // Delivers a release notice as if it came from the subscriber: wakes
  // `owner` if it waits here, or with an empty owner the oldest waiter.
  // The releaser calls it directly for a waiter of its own process.
  void notify(const std::string& channel, const std::string& owner);


 private:
  std::shared_ptr<State> state_;
  RedisExecutor& redis_;
};

}  // namespace dlock::detail
