#pragma once
// The one pub/sub connection of a service. A thread started on the first
// subscribe reads messages and calls back; subscribe/unsubscribe requests are
// handed to that thread through a wake-up pipe, so the connection is only ever
// touched by it. After an outage it reconnects with back-off, subscribes to
// every channel again, and calls every callback once (a message may have been
// missed meanwhile). A connection that goes silent without closing (a peer
// gone, no RST) is found by a PING every second while anything is
// subscribed, answered within the command timeout or dropped, and by TCP
// keepalive.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

class Subscriber {
 public:
  explicit Subscriber(RedisConfig config);
  ~Subscriber();  // stops and joins the thread
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // See RedisExecutor::subscribe. Several subscriptions may share a channel.
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<Millis> confirm_within = std::nullopt);

 private:
  // Implementation state is private to subscriber.cpp's design; see there.
  struct State;
  std::shared_ptr<State> state_;
};

// For an executor used in a fork child: its subscriber thread stayed in the
// parent, so subscribing there can never work. Throws ConnectionError saying so.
[[noreturn]] void refuse_subscribing_after_fork(const std::string& endpoint, const std::string& channel);

}  // namespace dlock::detail
