#include "lock_cycle.hpp"

#include <stdexcept>

#include "bare_client.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"
#include "minimal_pair_client.hpp"

namespace bench {
namespace {

constexpr long long kLeaseMs = 30000;

// dlock as a user calls it: a watchdog-renewed lock released at once.
class DlockCycle : public LockCycle {
 public:
  explicit DlockCycle(const Target& target) : service_(dlock::make_lock_service(target.config())) {}
  void run() override { service_->lock("bench:peers").unlock(); }

 private:
  std::shared_ptr<dlock::RedisLockService> service_;
};

// dlock as RAII code writes it: the guard's destructor sends the release and returns without its reply.
class DlockRaiiCycle : public LockCycle {
 public:
  explicit DlockRaiiCycle(const Target& target) : service_(dlock::make_lock_service(target.config())) {}
  void run() override { auto guard = service_->lock("bench:peers:raii"); }

 private:
  std::shared_ptr<dlock::RedisLockService> service_;
};

// dlock's own acquire and release scripts, sent raw.
class IdealCycle : public LockCycle {
 public:
  explicit IdealCycle(const Target& target) : client_(target.host, target.port) {}
  void run() override {
    if (!client_.acquire(kKey, kOwner, kLeaseMs)) throw std::runtime_error("ideal client refused " + kKey);
    client_.release(kKey, kOwner);
  }

 private:
  inline static const std::string kKey = "dlock:{bench:peers:ideal}";
  inline static const std::string kOwner = "ideal:1";
  IdealClient client_;
};

class MinimalPairCycle : public LockCycle {
 public:
  explicit MinimalPairCycle(const Target& target) : client_(target.host, target.port) {}
  void run() override {
    if (!client_.acquire(kKey, kFence, kOwner, kLeaseMs)) throw std::runtime_error("minimal pair refused " + kKey);
    if (client_.release(kKey, kChannel, kOwner, kLeaseMs) != 0) {
      throw std::runtime_error("minimal pair did not release " + kKey);
    }
  }

 private:
  inline static const std::string kKey = "bench:{peers:minimal}";
  inline static const std::string kFence = "bench:{peers:minimal}:fence";
  inline static const std::string kChannel = "bench:{peers:minimal}:released";
  inline static const std::string kOwner = "minimal:1";
  MinimalPairClient client_;
};

class BareCycle : public LockCycle {
 public:
  explicit BareCycle(const Target& target) : client_(target.host, target.port) {}
  void run() override {
    if (!client_.acquire(kKey, kLeaseMs)) throw std::runtime_error("bare client refused " + kKey);
    if (!client_.release(kKey)) throw std::runtime_error("bare client did not release " + kKey);
  }

 private:
  inline static const std::string kKey = "bench:peers:bare";
  BareClient client_;
};

}  // namespace

const std::vector<std::string>& lock_cycle_names() {
  static const std::vector<std::string> names{"dlock", "dlock-raii", "ideal", "minimal-pair", "bare"};
  return names;
}

std::unique_ptr<LockCycle> make_lock_cycle(const std::string& name, const Target& target) {
  if (name == "dlock") return std::make_unique<DlockCycle>(target);
  if (name == "dlock-raii") return std::make_unique<DlockRaiiCycle>(target);
  if (name == "ideal") return std::make_unique<IdealCycle>(target);
  if (name == "minimal-pair") return std::make_unique<MinimalPairCycle>(target);
  if (name == "bare") return std::make_unique<BareCycle>(target);
  throw std::invalid_argument("no lock cycle named '" + name + "'; choose dlock, dlock-raii, ideal, minimal-pair or bare");
}

double cycles_per_second(LockCycle& cycle, double seconds) {
  for (int i = 0; i < 100; ++i) cycle.run();
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long long cycles = 0;
  auto now = start;
  while (now < end) {
    cycle.run();
    ++cycles;
    now = Clock::now();
  }
  return cycles / std::chrono::duration<double>(now - start).count();
}

}  // namespace bench
