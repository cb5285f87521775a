#include "faults.hpp"

#include <signal.h>

#include <thread>

namespace dlock::history {
namespace {

void sleep_ms(long long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Holder faults wait this long for someone to be inside the section; the
// lock is held most of the time, so a miss means the lock is stuck (logged).
constexpr std::chrono::milliseconds kHolderPatience{1000};

}  // namespace

void FaultInjector::inject_one() {
  switch (draw(0, 4)) {
    case 0: kill_holder(); break;
    case 1: stop_holder(); break;
    case 2: stop_redis(); break;
    case 3: restart_redis(); break;
    default: client_kill(); break;
  }
}

void FaultInjector::kill_holder() {
  const int holder = fleet_.find_holder(kHolderPatience);
  if (holder < 0) {
    log_.append("skip", {{"kind", "kill-holder"}});
    return;
  }
  fleet_.kill_and_restart(holder);
}

void FaultInjector::stop_holder() {
  const int holder = fleet_.find_holder(kHolderPatience);
  if (holder < 0) {
    log_.append("skip", {{"kind", "stop-holder"}});
    return;
  }
  const std::int64_t from = monotonic_ns();  // before the signal: the window covers the whole stop
  fleet_.signal(holder, SIGSTOP);
  sleep_ms(lease_ms_ + draw(200, 1000));
  fleet_.signal(holder, SIGCONT);
  const std::int64_t until = monotonic_ns();
  log_.append_at(from, "fault",
                 {{"kind", "stop-holder"}, {"worker", fleet_.name(holder)},
                  {"pid", std::to_string(fleet_.child(holder).pid())}, {"until", std::to_string(until)}});
}

void FaultInjector::stop_redis() {
  const std::int64_t from = monotonic_ns();
  redis_.freeze();
  sleep_ms(draw(300, 2000));
  redis_.thaw();
  log_.append_at(from, "fault", {{"kind", "stop-redis"}, {"until", std::to_string(monotonic_ns())}});
}

void FaultInjector::restart_redis() {
  const int how = draw(0, 2);
  const std::int64_t at = monotonic_ns();
  if (how == 2) {
    forget_locks();
    redis_.kill();
  } else if (how == 1) {
    redis_.kill();  // SIGKILL: no shutdown; appendfsync always kept every acknowledged write
  } else {
    redis_.stop();  // SIGTERM: a clean shutdown
  }
  log_.append_at(at, "fault", {{"kind", "restart-redis"}, {"how", how == 2 ? "forget" : how == 1 ? "kill" : "term"}});
  // Forgetting, it comes back at once, so that holders in their section live through it.
  if (how != 2) sleep_ms(draw(100, 800));
  redis_.start();  // same port, same directory: it loads the AOF (answering -LOADING meanwhile)
  log_.append("redis-up", {{"pid", std::to_string(redis_.pid())}});
}

void FaultInjector::forget_locks() {
  // Every key of dlock's (the lock, its line and fencing counter, the
  // services' registry entries), as a restart without persistence loses
  // them; the history's counter stays. A grant between this and the kill is
  // kept by the AOF like any other.
  try {
    redis_.run({"EVAL",
                "for _, key in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', key) end return 1", "0",
                "dlock:*"});
  } catch (const std::exception& e) {
    log_.append("skip", {{"kind", "forget-locks"}}, e.what());
  }
}

void FaultInjector::client_kill() {
  try {
    // SKIPME defaults to yes: the driver's own connection survives.
    const std::string killed = redis_.run({"CLIENT", "KILL", "TYPE", "normal"});
    if (killed.empty() || killed.find_first_not_of("0123456789") != std::string::npos) {
      log_.append("skip", {{"kind", "client-kill"}}, killed);  // an error reply, not a count
      return;
    }
    log_.append("fault", {{"kind", "client-kill"}, {"killed", killed}});
  } catch (const std::exception& e) {
    log_.append("skip", {{"kind", "client-kill"}}, e.what());
  }
}

}  // namespace dlock::history
