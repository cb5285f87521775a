#include "payment_step.hpp"

#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

#include "lua/example_scripts.hpp"

namespace example {
namespace {

// A call's id: random, so calls of different processes (and hosts) never share one.
std::string new_call_id() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  return std::to_string(random());
}

}  // namespace

PaymentStep::PaymentStep(const std::string& sale, long long slots, std::chrono::milliseconds permit_lease,
                         bool limited, std::chrono::milliseconds call_takes)
    : semaphore_("payments:" + sale), calls_key_("payments:{" + sale + "}:calls"),
      peak_key_("payments:{" + sale + "}:peak"), slots_(slots), limited_(limited),
      call_counts_for_(permit_lease / 3), call_takes_(call_takes) {
  // A live call must count for as long as it lasts, or the check would miss it.
  if (call_takes_ >= call_counts_for_) {
    throw std::invalid_argument("--payment-ms " + std::to_string(call_takes_.count()) +
                                " must be shorter than a third of lock.watchdog_timeout_ms (" +
                                std::to_string(call_counts_for_.count()) + " ms): a call counts that long");
  }
}

void PaymentStep::reset(dlock::RedisExecutor& redis) const {
  redis.command({"DEL", calls_key_, peak_key_});  // one hash tag: one slot, in a cluster too
}

void PaymentStep::call_provider(dlock::RedisExecutor& redis) const {
  const std::string id = new_call_id();
  const std::string script(lua::payment_call_begin);
  const dlock::RedisReply begun =
      redis.command({"EVAL", script, "2", calls_key_, peak_key_, id, std::to_string(call_counts_for_.count())});
  // A count that silently failed would make the sale's check pass for nothing.
  if (begun.is_error()) {
    throw std::runtime_error("payment step: counting a call in " + calls_key_ + " failed: " + begun.str);
  }
  std::this_thread::sleep_for(call_takes_);  // the provider at work
  redis.command({"ZREM", calls_key_, id});
}

void PaymentStep::pay(dlock::RedisLockService& service, dlock::RedisExecutor& redis, bool use_lock) const {
  if (slots_ == 0) return;
  if (!use_lock || !limited_) return call_provider(redis);
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
