// A history worker: loops lock → read-modify-write of a counter → unlock on
// one lock and appends every step to its own history file (event.hpp), so
// the checker can later prove from the record what happened.
//
//   history_worker --port P --id N --file PATH [--mode watchdog|fixed] [--api blocking|async]
//                  [--release unlock|destructor] [--lease-ms 1000] [--seed S] [--max-seconds 900]
//
// --release destructor ends each hold by the guard's destructor, which sends
// the release without waiting for its reply (the reply is read off the
// worker's thread): other workers' acquisitions race a release nobody waits
// for. The worker then waits for the reply's verdict in stats() (and for the
// on_lost hook's line, if it found the lock lost) before it records the
// release, so its record reads as the others' and a late hook never lands
// on its next hold.
//
// --api async takes and releases the lock through the async API
// (<dlock/asio.hpp>: async_lock, async_unlock): the acquisition runs on
// dlock's I/O threads and sleeps in line without a thread; this worker waits
// for its completion (asio::use_future), so its record reads as the others'.
//
// The counter is the plain string key `history:counter`, read with GET and
// written with SET on a connection of its own: nothing but the lock keeps
// two workers' read-modify-writes apart. The section checks its guard just
// before the SET, as a careful user would; only a holder stopped between
// that check and the SET can still write late.
//
// The work inside a section takes 5-60 ms, and in watchdog mode one section
// in 30 takes 0.4-0.7 of a lease: the watchdog renews the lock through it
// (at a third of the lease), and a restart that forgets the lock finds its
// holder still inside (how soon that holder is told is the record's
// restart-notice figure).
//
// It survives every exception (records it and goes on), leaves after the
// section in progress on SIGTERM, and dies with the driver (PDEATHSIG), so a
// crashed driver leaves no worker behind. Bounded by --max-seconds.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <random>
#include <thread>

#include <asio/use_future.hpp>

#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "event_log.hpp"
#include "example_flags.hpp"

using namespace std::chrono_literals;

namespace {

constexpr const char* kLockKey = "history";
constexpr const char* kCounterKey = "history:counter";

std::atomic<bool> stop_requested{false};
extern "C" void on_term(int) { stop_requested = true; }

// The most specific dlock error class, for the record.
std::string error_class(const std::exception& e) {
  if (dynamic_cast<const dlock::LockLostError*>(&e)) return "LockLostError";
  if (dynamic_cast<const dlock::LockTimeoutError*>(&e)) return "LockTimeoutError";
  if (dynamic_cast<const dlock::ConnectionError*>(&e)) return "ConnectionError";
  if (dynamic_cast<const dlock::RedisError*>(&e)) return "RedisError";
  if (dynamic_cast<const dlock::NotOwnerError*>(&e)) return "NotOwnerError";
  if (dynamic_cast<const dlock::InvalidArgument*>(&e)) return "InvalidArgument";
  if (dynamic_cast<const dlock::Error*>(&e)) return "Error";
  return "std::exception";
}

// An error reply to the counter's own GET or SET (e.g. -LOADING): nothing was written.
struct ReplyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Worker {
 public:
  explicit Worker(const example::Flags& flags)
      : log_(flags.text("--file", ""), "w" + flags.text("--id", "")),
        fixed_lease_(flags.text("--mode", "watchdog") == "fixed"),
        async_(flags.text("--api", "blocking") == "async"),
        destructor_release_(flags.text("--release", "unlock") == "destructor"),
        lease_(flags.number("--lease-ms", 1000, 1)),
        random_(static_cast<unsigned>(flags.number("--seed", 1, 0))) {
    config_.redis.host = "127.0.0.1";
    config_.redis.port = static_cast<int>(flags.number("--port", 0, 1));
    config_.redis.pool_size = 2;
    config_.redis.connect_timeout = 500ms;
    config_.redis.command_timeout = 1000ms;
    config_.lock.watchdog_timeout = lease_;
    config_.logging.level = "off";
    log_.append("start", {{"mode", fixed_lease_ ? "fixed" : "watchdog"},
                          {"api", async_ ? "async" : "blocking"},
                          {"lease_ms", std::to_string(lease_.count())}});
  }

  void run(std::chrono::seconds max_time) {
    const auto deadline = std::chrono::steady_clock::now() + max_time;
    connect(deadline);
    while (!stop_requested && std::chrono::steady_clock::now() < deadline) {
      cycle();
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_(random_)));
    }
    log_.append("stop");
  }

 private:
  // make_lock_service fails fast while Redis is down or restarting: retry.
  void connect(std::chrono::steady_clock::time_point deadline) {
    while (!stop_requested && std::chrono::steady_clock::now() < deadline) {
      try {
        service_ = dlock::make_lock_service(config_);
        data_ = std::make_shared<dlock::HiredisExecutor>(config_.redis);
        service_->on_lost([this](const std::string&) {
          log_.append("lost", {{"via", "hook"}});
          hooks_told_.fetch_add(1);
        });
        return;
      } catch (const std::exception& e) {
        log_.append("connect-fail", {{"error", error_class(e)}}, e.what());
        std::this_thread::sleep_for(100ms);
      }
    }
  }

  void cycle() {
    if (!service_) return;
    log_.append("invoke");
    dlock::LockGuard guard;
    try {
      dlock::LockOptions options{.wait = 3s};
      if (fixed_lease_) options.lease = lease_;
      guard = async_ ? dlock::async_lock(*service_, kLockKey, options, asio::use_future).get()
                     : service_->lock(kLockKey, options);
    } catch (const std::exception& e) {
      log_.append("fail", {{"error", error_class(e)}}, e.what());
      std::this_thread::sleep_for(20ms);
      return;
    }
    log_.append("grant", {{"token", std::to_string(guard.fencing_token())}});
    section(guard);
    if (guard.lost()) log_.append("lost", {{"via", "flag"}});
    if (destructor_release_ && !async_) return release_by_destructor(guard);
    try {
      if (async_) {
        dlock::async_unlock(std::move(guard), asio::use_future).get();
      } else {
        guard.unlock();
      }
      log_.append("release", {{"outcome", "ok"}});
    } catch (const std::exception& e) {
      if (dynamic_cast<const dlock::LockLostError*>(&e)) log_.append("lost", {{"via", "error"}});
      log_.append("release", {{"outcome", "error"}, {"error", error_class(e)}}, e.what());
    }
  }

  // The guard's destructor releases; the reply's verdict is read back from
  // stats() (released, lost or failed), as unlock() would have said it.
  void release_by_destructor(dlock::LockGuard& guard) {
    if (guard.lost()) {  // unlock() would throw LockLostError without a release of its own
      guard = dlock::LockGuard();
      log_.append("release", {{"outcome", "error"}, {"error", "LockLostError"}}, "lost before its release");
      return;
    }
    const dlock::LockStats before = service_->stats();
    guard = dlock::LockGuard();  // returns once the release is sent
    dlock::LockStats after = service_->stats();
    const auto settled = [&] {
      after = service_->stats();
      return after.released + after.lost + after.releases_failed > before.released + before.lost + before.releases_failed;
    };
    const auto give_up = std::chrono::steady_clock::now() + 2 * config_.redis.command_timeout + 1s;
    while (!settled() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
    if (after.lost > before.lost) {
      while (hooks_told_.load() < after.lost && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(1ms);
      }
      log_.append("release", {{"outcome", "error"}, {"error", "LockLostError"}}, "found lost by its release");
    } else if (after.released > before.released) {
      log_.append("release", {{"outcome", "ok"}});
    } else {
      log_.append("release", {{"outcome", "error"}, {"error", "ConnectionError"}}, "no verdict on the release");
    }
  }

  // GET, some work, check, SET value+1; records the outcome as `end`.
  void section(const dlock::LockGuard& guard) {
    std::string write = "none";  // becomes "unknown" once the SET is on its way
    try {
      const dlock::RedisReply got = data_->command({"GET", kCounterKey});
      if (got.is_error()) throw ReplyError("GET " + std::string(kCounterKey) + " answered " + got.str);
      const long long value = got.is_nil() ? 0 : std::stoll(got.str);
      log_.append("read", {{"value", std::to_string(value)}});
      std::this_thread::sleep_for(std::chrono::milliseconds(work_ms()));  // the work a fault lands in
      guard.check();
      write = "unknown";
      const dlock::RedisReply set = data_->command({"SET", kCounterKey, std::to_string(value + 1)});
      if (set.is_error()) {
        write = "none";  // Redis refused it: not written
        throw ReplyError("SET " + std::string(kCounterKey) + " answered " + set.str);
      }
      log_.append("end", {{"write", "ok"}, {"value", std::to_string(value + 1)}});
    } catch (const std::exception& e) {
      if (dynamic_cast<const dlock::LockLostError*>(&e)) log_.append("lost", {{"via", "error"}});
      const std::string kind = dynamic_cast<const ReplyError*>(&e) ? "ReplyError" : error_class(e);
      log_.append("end", {{"write", write}, {"error", kind}}, e.what());
    }
  }

  // How long this section works: a long one (0.4-0.7 of a lease) only under a watchdog lease.
  int work_ms() {
    const bool long_one = !fixed_lease_ && long_section_(random_);
    return long_one ? static_cast<int>(static_cast<double>(lease_.count()) * (0.4 + 0.3 * unit_(random_)))
                    : work_ms_(random_);
  }

  dlock::history::EventLog log_;
  bool fixed_lease_;
  bool async_;
  bool destructor_release_;
  std::atomic<std::uint64_t> hooks_told_{0};
  dlock::Millis lease_;
  std::mt19937 random_;
  std::uniform_int_distribution<int> work_ms_{5, 60};
  std::bernoulli_distribution long_section_{1.0 / 30};
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::uniform_int_distribution<int> pause_ms_{0, 20};
  dlock::Config config_;
  std::shared_ptr<dlock::RedisLockService> service_;
  std::shared_ptr<dlock::HiredisExecutor> data_;
};

}  // namespace

int main(int argc, char** argv) {
  const example::Flags flags(
      argc, argv, {"--port", "--id", "--file", "--mode", "--api", "--release", "--lease-ms", "--seed", "--max-seconds"}, {},
      "usage: history_worker --port P --id N --file PATH [--mode watchdog|fixed] [--api blocking|async]\n"
      "                      [--release unlock|destructor] [--lease-ms 1000] [--seed S] [--max-seconds 900]\n");
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the driver
  std::signal(SIGTERM, on_term);
  const std::string mode = flags.text("--mode", "watchdog");
  const std::string api = flags.text("--api", "blocking");
  if (flags.text("--file", "").empty() || flags.text("--id", "").empty() || (mode != "watchdog" && mode != "fixed") ||
      (api != "blocking" && api != "async")) {
    std::cerr << "history_worker: --file and --id are required; --mode is watchdog or fixed; --api blocking or async\n";
    return 64;
  }
  try {
    Worker worker(flags);
    worker.run(std::chrono::seconds(flags.number("--max-seconds", 900, 1)));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "history_worker: " << e.what() << "\n";
    return 1;
  }
}
