#pragma once
// The local waiters of busy locks, per release channel. The first waiter of a
// channel subscribes to it (through the executor's one shared subscriber
// connection); the last one to leave unsubscribes. A release notice names the
// waiter (acquisition id) whose turn it is: only that waiter wakes, so a
// release does not stampede every local waiter at Redis. A notice that names
// nobody (the subscriber reconnected, and notices may have been missed) wakes
// every local waiter of the channel, so the one whose turn it is wakes too.
//
// A thread releasing a lock may also *offer* it to a local waiter asleep in
// line: the waiter stays asleep until the releaser's script has run, then
// wakes either holding the lock (a direct grant, no round trip of its own)
// or to try again as if notified. A waiter is never offered the lock while it
// is running a script itself, so it never learns of one grant twice.

#include <condition_variable>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

  // The lock, granted to a waiter inside another thread's release.
  struct DirectGrant {
    std::uint64_t fencing_token = 0;
    std::chrono::steady_clock::time_point sent;  // when the release went out: the new lease started after it
    int handoffs_in_a_row = 0;                   // direct grants in a row within this process, this one included
  };

  // A waiter's place in line; leaving (destruction) passes an unused notice on.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(std::shared_ptr<State> state, Channel* channel, std::list<Waiter>::iterator self);
    Ticket(Ticket&&) = delete;
    ~Ticket();
    explicit operator bool() const { return state_ != nullptr; }

    // Sleeps until a release notice for this channel reaches this waiter, or
    // for `at_most`, or (past `at_most` if an offer is in flight) until the
    // lock is granted to it directly; returns that grant.
    std::optional<DirectGrant> wait(Millis at_most);

    // The same sleep without a thread (the async API's): returns at once;
    // `wake` is called once, on whichever thread delivers it, when a notice
    // or a direct grant reaches this waiter, or when expire() is called (a
    // timer, a cancellation) and no offer is in flight (one in flight is
    // settled first). The waiter then collects with woken(). `wake` must not
    // call back into this ticket (it is called with nothing locked; post).
    void sleep_async(std::function<void()> wake);
    // True once while a release's hand-off wakes its waiter, on the
    // releasing thread, with nothing of the table locked: that wake may
    // collect the grant there and then (it needs no round trip) instead of
    // posting. Asking consumes it, so a wake nested in that collection (a
    // waiter whose own sleep holds its lock) is never taken for it.
    static bool take_grant_wake();
    // Ends an async sleep now, unless an offer is in flight (then when it is
    // settled). True iff the lock can no longer reach this waiter by a
    // hand-off: none was granted and none is in flight (an awake waiter is
    // never offered one).
    bool expire();
    // After an async sleep's wake: the lock if it was handed over, and the waiter awake again.
    std::optional<DirectGrant> woken();

   private:
    friend class WaiterTable;
    std::shared_ptr<State> state_;
    Channel* channel_ = nullptr;
    std::list<Waiter>::iterator self_;
  };

  // The lock offered to one sleeping waiter while a release runs. Settle it
  // with grant(); dropping it unsettled wakes the waiter to try on its own.
  class Offer {
   public:
    Offer() = default;
    Offer(Offer&& other) noexcept;
    Offer& operator=(Offer&&) = delete;
    ~Offer();
    explicit operator bool() const { return state_ != nullptr; }
    const std::string& owner() const;
    long long lease_ms() const;
    void grant(const DirectGrant& grant);
    // Settles it without a grant: the waiter wakes to try by itself. Idempotent.
    void decline();

   private:
    friend class WaiterTable;
    std::shared_ptr<State> state_;
    Waiter* waiter_ = nullptr;
  };

  // Joins the line of `channel` as `owner`, subscribing first if this is its
  // first waiter. Returns once the subscription is confirmed, could not be,
  // or `until` passed (then the waiter relies on its timed retries alone,
  // which are never further apart than a third of the turn window).
  // `lease_ms` is the lease a direct grant must give it.
  // `kept_key`, when not empty: the user key of a line the service's line
  // keeper renews for its waiters (they need not wake to renew their place).
  void enter(std::string_view channel, const std::string& owner, long long lease_ms, Ticket& ticket,
             std::chrono::steady_clock::time_point until, std::string_view kept_key = {});

  // The lines the keeper renews now: each one's user key, channel, and its waiters' owners.
  struct KeptLine {
    std::string key;
    std::string channel;
    std::vector<std::string> owners;
  };
  std::vector<KeptLine> kept_lines() const;

  // Picks the oldest waiter of `channel` asleep in line, if any, for the
  // releasing thread (whose owner token is `releaser`) to hand the lock to.
  Offer offer(std::string_view channel, const std::string& releaser);

  // Delivers a release notice as if it came from the subscriber: wakes
  // `owner` if it waits here, or with an empty owner every waiter of the channel.
  // The releaser calls it directly for a waiter of its own process.
  void notify(std::string_view channel, const std::string& owner);
  // notify() for each of `owners`, in one pass over the channel's line.
  void notify_each(std::string_view channel, const std::vector<std::string>& owners);


 private:
  std::shared_ptr<State> state_;
  RedisExecutor& redis_;
};

}  // namespace dlock::detail
