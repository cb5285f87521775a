// With lock.replica_acks the watchdog renews a batch of locks in one
// pipeline with one WAIT per script group, rounds that fell due meanwhile go
// out together, and each reply of a pipeline has the command timeout of its
// own. A review found 600 locks lost although Redis and its replica had
// renewed them: a WAIT per 100-lock call, the timeout counted over the whole
// pipeline, and rounds queued one behind another. The replica's link goes
// through a proxy that delays each direction by 100 ms.
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <iostream>
#include <thread>
#include <vector>

#include "replicated_pair.hpp"
#include "services.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::test::RedisServer;

namespace {

// Holds `per_thread` watchdog-renewed locks on each of `threads` threads, taken
// at once while the replica is quick (so their renewals fall due together, in
// one batch), and reports what the service says 7 s after the replica slowed.
dlock::LockStats hold_and_watch(dlock::test::ReplicatedPair& pair, int threads, int per_thread, const std::string& tag) {
  auto service = dlock::test::make_service(pair.master, [](dlock::Config& c) {
    c.lock.replica_acks = 1;
    c.lock.replica_ack_timeout = 900ms;  // below command_timeout (1000 ms), as required
    c.lock.watchdog_timeout = 3000ms;    // renewals every second
  });
  pair.link.set_delay(0);
  std::barrier taken(threads + 1);
  std::barrier reenter(threads + 1);
  std::barrier done(threads + 1);
  std::atomic<int> still_held{0};
  std::vector<std::thread> holders;
  for (int t = 0; t < threads; ++t) {
    holders.emplace_back([&, t] {
      std::vector<dlock::LockGuard> held;
      for (int i = 0; i < per_thread; ++i) {
        held.push_back(service->lock(tag + "-" + std::to_string(t) + "-" + std::to_string(i)));
      }
      taken.arrive_and_wait();
      reenter.arrive_and_wait();
      done.arrive_and_wait();
      std::this_thread::sleep_for(7s);
      for (auto& guard : held) {
        if (guard) ++still_held;
      }
      for (auto& guard : held) guard.detach();
    });
  }
  taken.arrive_and_wait();
  // From now on the replica acknowledges each WAIT after about 2 x 100 ms (its ack timeout is 900 ms).
  pair.link.set_delay(100);
  reenter.arrive_and_wait();
  done.arrive_and_wait();
  for (auto& thread : holders) thread.join();
  const dlock::LockStats stats = service->stats();
  std::cout << "batch_deadline: " << threads * per_thread << " locks renewed by the watchdog with "
            << "replica_acks=1: still held after 7 s: " << still_held.load() << ", lost " << stats.lost
            << ", renewals sent " << stats.renewals_sent << " in " << stats.renewal_rounds << " rounds, failed "
            << stats.renewals_failed << "\n";
  pair.link.set_delay(0);
  return stats;
}

}  // namespace

TEST_CASE("review: with replica_acks a renewal batch whose WAITs add up past command_timeout is still renewed", "[replica_acks]") {
  dlock::test::ReplicatedPair pair;
  // Control: 60 locks, one renew_many call and one WAIT per round: renewed, nothing lost.
  const dlock::LockStats small = hold_and_watch(pair, 3, 20, "small");
  CHECK(small.lost == 0);
  // 600 locks, the same replica: six calls and six WAITs per round (or several batches of two or more).
  const dlock::LockStats large = hold_and_watch(pair, 3, 200, "large");
  CHECK(large.lost == 0);
}
