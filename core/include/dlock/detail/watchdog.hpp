#pragma once
// The watchdog: one scheduler thread per service serving every held lock.
// Each watched lock has one task: a watchdog-managed lock is renewed every
// lease/3 (renewals falling due together go out as one pipeline); a fixed
// lease is only checked when it runs out. A lock whose renewal finds it gone,
// or whose validity ran out by the local clock before a renewal succeeded, is
// handed to the lost handler and no longer watched. Verdicts come from a
// scheduler thread that never waits for Redis; the renewals' I/O runs on a
// renewer thread of its own, on a connection kept out of the pool, and gives
// up before the first verdict among the locks it renews. So neither a Redis
// that does not answer nor a saturated pool delays a verdict.
//
// When the executor says a master may have forgotten its locks (it restarted,
// or a failover put another server in its place: RedisExecutor::watch_resets),
// every watchdog-managed lock falls due at once: one round, as soon as that
// master answers again, tells the holders whose locks it forgot, instead of
// each lock's next renewal, up to a third of a lease later.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/logger.h>

#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/stats_recorder.hpp"
#include "dlock/scripts.hpp"

namespace dlock::detail {

class Watchdog {
 public:
  using LostHandler = std::function<void(const std::shared_ptr<HeldLock>&, const std::string& why)>;

  // `redis` is asked for its masters' resets from the first watch() on; it
  // and `scripts` must outlive the watchdog (or its stop()).
  Watchdog(RedisExecutor& redis, ScriptRunner& scripts, StatsRecorder& stats, std::shared_ptr<spdlog::logger> logger);
  // Stops and joins the thread. If the lost handler itself drops the last
  // reference to the service, the thread is detached instead and exits on
  // its own without touching anything but its shared state.
  ~Watchdog();
  // What the destructor does, for an owner that must know no renewal and no
  // keep-alive beat is in flight any more, and no reset notice comes. Idempotent.
  void stop();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Called, on the watchdog's thread, with each lock found lost. Set it
  // before the first watch().
  void set_lost_handler(LostHandler on_lost);

  // Runs `beat` every `period`, first one period from now, on the renewer
  // thread (it may do I/O; it gets a deadline to give up at, a tenth of the
  // period, 10 ms to 1 s, so that renewals never wait long behind it), for
  // work a service does at a low fixed rate whatever it holds: the instance
  // registry. Renewals go first when both are due. Set it before the first
  // watch(): the beat runs once the threads run, from the first watch() on.
  void keep_alive(Millis period, std::function<void(Clock::time_point deadline)> beat);

  // Starts watching (or re-plans) a lock: the next renewal is due lease/3
  // after `granted` (when its lease was last granted), or, for a fixed lease,
  // the check when its validity runs out. Starts the thread on first use.
  void watch(const std::shared_ptr<HeldLock>& lock, Clock::time_point granted);

  // Stops watching. Called before the final release is sent, so no renewal
  // can re-extend a lock after its release; a renewal already in flight is
  // ignored when it returns.
  void unwatch(const HeldLock& lock);

  std::size_t watched_count() const;

 private:
  struct State;
  // The scheduler: plans tasks, gives verdicts on time, never waits for Redis.
  static void run(const std::shared_ptr<State>& state);
  // The renewer: sends the batches the scheduler hands it, one at a time.
  static void renew_batches(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;   // the scheduler; started under State::mutex
  std::thread renewer_;  // started with it
};

}  // namespace dlock::detail
