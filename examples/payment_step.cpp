#include "payment_step.hpp"

#include <chrono>
#include <iostream>
#include <thread>

namespace example {

void PaymentStep::reset(dlock::RedisExecutor& redis) const {
  redis.command({"DEL", inflight_key_});  // one key per command: they may sit in different cluster slots
  redis.command({"DEL", peak_key_});
}

void PaymentStep::call_provider(dlock::RedisExecutor& redis) const {
  const dlock::RedisReply now = redis.command({"INCR", inflight_key_});
  // ZADD GT keeps the highest concurrency any call saw.
  redis.command({"ZADD", peak_key_, "GT", std::to_string(now.integer), "peak"});
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the provider at work
  redis.command({"DECR", inflight_key_});
}

void PaymentStep::pay(dlock::RedisLockService& service, dlock::RedisExecutor& redis, bool use_lock) const {
  if (slots_ == 0) return;
  if (!use_lock) return call_provider(redis);
  const dlock::Semaphore payments = service.semaphore(semaphore_, slots_);
  WITH_DISTRIBUTED_PERMIT(payments, {.wait = std::chrono::seconds(30)}) { call_provider(redis); }
}

bool PaymentStep::report(dlock::RedisExecutor& redis) const {
  if (slots_ == 0) return true;
  const dlock::RedisReply peak = redis.command({"ZSCORE", peak_key_, "peak"});
  const long long highest = peak.is_nil() ? 0 : std::stoll(peak.str);
  std::cout << "payment_slots=" << slots_ << " payment_peak=" << highest << std::endl;
  return highest <= slots_;
}

}  // namespace example
