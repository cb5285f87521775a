// prometheus_text: stats() as a Prometheus scrape reads them.
#include <catch2/catch.hpp>

#include <sstream>

#include "dlock/prometheus_text.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("stats come out in the Prometheus text format with HELP and TYPE lines", "[stats][metrics]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  {
    auto guard = service->lock("k");
    CHECK_FALSE(other->try_lock("k"));
  }
  // The release's reply is read off this thread, after the guard's destructor returned.
  REQUIRE(dlock::test::eventually([&] { return service->stats().released == 1; }));
  const std::string text = dlock::prometheus_text(service->stats(), {{"service", "inventory"}});
  CHECK_THAT(text, Contains("# TYPE dlock_acquired_total counter\ndlock_acquired_total{service=\"inventory\"} 1\n"));
  CHECK_THAT(text, Contains("dlock_released_total{service=\"inventory\"} 1\n"));
  CHECK_THAT(text, Contains("# TYPE dlock_acquire_seconds summary\n"));
  CHECK_THAT(text, Contains("dlock_acquire_seconds{service=\"inventory\",quantile=\"0.5\"} "));
  CHECK_THAT(text, Contains("dlock_acquire_seconds_count{service=\"inventory\"} 1\n"));
  CHECK_THAT(text, Contains("# TYPE dlock_acquire_max_seconds gauge\n"));
  CHECK_THAT(dlock::prometheus_text(other->stats()), Contains("\ndlock_busy_total 1\n") &&
                                                         Contains("\ndlock_timeouts_total 0\n"));
  // Every line is a comment or "name[{labels}] value".
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK((line.starts_with("# HELP dlock_") || line.starts_with("# TYPE dlock_") ||
           (line.starts_with("dlock_") && line.find(' ') != std::string::npos)));
  }
}

TEST_CASE("label values are escaped and bad label names refused", "[stats][metrics]") {
  const dlock::LockStats stats;
  CHECK_THAT(dlock::prometheus_text(stats, {{"service", "a\"b\\c\nd"}}),
             Contains("dlock_lost_total{service=\"a\\\"b\\\\c\\nd\"} 0\n"));
  for (const char* bad : {"", "9lives", "has-dash", "quantile", "__reserved"}) {
    INFO(bad);
    CHECK_THROWS_AS(dlock::prometheus_text(stats, {{bad, "x"}}), dlock::InvalidArgument);
  }
}
