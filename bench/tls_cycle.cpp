// Part tls: what TLS adds to an uncontended lock+unlock. Two throwaway
// servers, one speaking TLS only and one plaintext, both on loopback; a
// service on each, timed in alternating blocks so both see the same round
// trip modes. Certificates are scripts/make_test_certs.sh's.
#include <functional>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "redis_server.hpp"

namespace bench {
namespace {

void time_cycles(Samples& samples, int count, dlock::RedisLockService& service) {
  for (int i = 0; i < count; ++i) {
    const auto start = Clock::now();
    service.lock("bench:tls").unlock();
    samples.add(Clock::now() - start);
  }
}

}  // namespace

bool run_tls(Report& report, const Target& target) {
  dlock::test::RedisServer tls_server({}, dlock::test::ServerTls{});
  dlock::test::RedisServer plain_server;
  auto quiet = [](dlock::Config config) {
    config.logging.level = "warn";
    config.redis.command_timeout = dlock::Millis(5000);
    return config;
  };
  auto tls_service = dlock::make_lock_service(quiet(tls_server.config()));
  auto plain_service = dlock::make_lock_service(quiet(plain_server.config()));
  const int rounds = target.quick ? 4 : 30;
  const int block = target.quick ? 100 : 400;
  Samples tls_cycle, plain_cycle;
  for (int round = 0; round < rounds; ++round) {
    time_cycles(plain_cycle, block, *plain_service);
    time_cycles(tls_cycle, block, *tls_service);
  }
  report.section("TLS: uncontended lock+unlock, TLS server vs plaintext server (alternating blocks)");
  report.latency("plaintext lock+unlock", plain_cycle);
  report.latency("TLS lock+unlock", tls_cycle);
  report.figure("ratio TLS / plaintext cycle (p50)", tls_cycle.percentile_us(500) / plain_cycle.percentile_us(500), "x",
                "target <= 1.30");
  return true;
}

}  // namespace bench
