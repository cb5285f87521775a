// The lock's acquire: a call's entry (re-entry first, else a new
// acquisition), the lock's try (LockTry: the acquire script, what its reply
// says, a grant too few replicas acknowledged given back, leaving the line),
// run as the steps every primitive shares (acquisition.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "lock/acquisition.hpp"
#include "lock/script_replies.hpp"

namespace dlock::detail {
namespace {

// Whether an acquire script's reply is a grant: its token, an integer > 0 or text.
bool is_grant(const RedisReply& reply) {
  return reply.type == RedisReply::Type::String || (reply.type == RedisReply::Type::Integer && reply.integer > 0);
}

}  // namespace

// The lock's try: the acquire script on the lock's hash and line.
class LockTry final : public AcquireTry {
 public:
  LockTry(ServiceCore& core, std::string_view key, std::string held, std::string id, Millis lease, bool renewed)
      : core_(core), key_(key), names_(core.names_for(key)), held_(std::move(held)), id_(std::move(id)),
        lease_(lease), renewed_(renewed), lease_arg_(std::to_string(lease.count())),
        channel_(names_.channel()),
        // Over a Redlock, the place in line is this caller's first try, by its own clock, on every node alike.
        arrival_arg_(core.scripts_.quorum()
                         ? ' ' + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                    std::chrono::system_clock::now().time_since_epoch())
                                                    .count())
                         : std::string()) {}

  Reading run(Millis wait_left) override {
    const std::string settings_arg = std::to_string(wait_left.count()) + ' ' + core_.line_settings_ + arrival_arg_;
    const std::array<std::string_view, 3> args{id_, lease_arg_, settings_arg};
    const RedisReply reply = send(args);
    core_.throw_if_transient(key_, reply, "acquire");
    if (reply.is_error() && reply.str.starts_with(kNotAcknowledgedError)) {
      return {Reading::Kind::not_acknowledged, 0, 0, reply.str.substr(kNotAcknowledgedError.size() + 1)};
    }
    // Granted: the token (an integer > 0, or text). Not granted: -1 - nap.
    if (is_grant(reply)) {
      const std::optional<std::uint64_t> token = token_of(reply);
      if (!token) core_.throw_reply_error(key_, names_, reply, "acquire");
      return {Reading::Kind::granted, *token, 0, {}};
    }
    if (reply.type != RedisReply::Type::Integer) core_.throw_reply_error(key_, names_, reply, "acquire");
    return {Reading::Kind::busy, 0, -1 - reply.integer, {}};
  }
  // The acquire script; after this process's release of the same lock if that one's reply is still to come:
  // on its connection, so Redis runs the release first and this call does not wait for its reply (nor find its
  // own process's lock still held and join the line).
  RedisReply send(std::span<const std::string_view> args) {
    std::unique_ptr<DeferredReleases::Release> before = core_.deferred_.claim(names_.lock());
    if (!before) return core_.scripts_.run_acknowledged(kAcquireScript, names_.script_keys(), args, &is_grant);
    std::vector<std::unique_ptr<DeferredReleases::Release>> releases;
    releases.push_back(std::move(before));
    return core_.run_after_releases(std::move(releases), kAcquireScript, names_.script_keys(), args, &is_grant);
  }
  LockGuard grant(const Reading& granted, Clock::time_point sent, Clock::time_point called) override {
    return core_.grant(key_, names_.lock(), id_, held_, granted.token, lease_, renewed_, sent, called);
  }
  LockGuard grant_direct(const WaiterTable::DirectGrant& direct, Clock::time_point called) override {
    return core_.grant_direct(key_, names_, id_, held_, direct, lease_, renewed_, called);
  }
  void give_back() override {
    core_.logger_->debug("{}: granted but too few replicas acknowledged; giving it back and trying again",
                         lock_label(key_));
    core_.undo_unacknowledged_grant(key_, names_, id_);
  }
  void leave_line() override { core_.leave_line(names_, id_); }
  // While the lock is held, its release is still to come: a plain EXISTS
  // tells, at a fraction of what another try would cost the server.
  bool release_still_to_come() override { return core_.still_held(names_); }
  void remember_orphan() override { core_.remember_orphan(held_, id_, lease_); }
  ServiceCore::NotHad not_had(long long last_nap_ms) const override {
    ServiceCore::NotHad why;
    why.what = lock_label(key_);
    why.busy = "another owner holds it or waits ahead in line (lease or turn left " + std::to_string(last_nap_ms) +
               " ms)";
    return why;
  }
  // Over a Redlock each waiter renews its own place (its nodes' lines are kept by its tries, node by node).
  std::string_view kept_key() const override { return core_.scripts_.quorum() ? std::string_view() : key_; }
  std::string_view key() const override { return key_; }
  const std::string& channel() const override { return channel_; }
  const std::string& id() const override { return id_; }
  Millis lease() const override { return lease_; }

 private:
  ServiceCore& core_;
  const std::string_view key_;
  const LockNames names_;
  const std::string held_;
  const std::string id_;
  const Millis lease_;
  const bool renewed_;
  const std::string lease_arg_;
  const std::string channel_;
  const std::string arrival_arg_;
};

LockGuard ServiceCore::acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout) {
  // A waiter may sleep for seconds: keep this alive even if the service object is dropped meanwhile.
  const std::shared_ptr<ServiceCore> self = shared_from_this();
  AcquireStart start = start_acquire(key, options, throw_on_timeout);
  if (start.done) return std::move(*start.done);
  Acquisition acquisition(*this, *start.attempt, start.called, start.deadline);
  return run_blocking(acquisition, throw_on_timeout);
}

AcquireStart ServiceCore::start_acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout) {
  refuse_after_fork();
  validate(key, options);
  refuse_thread_owner_on_event_loop(lock_label(key), options);
  const Millis wait = options.wait.value_or(config_.wait);
  const bool renewed = !options.lease.has_value();
  const Millis lease = options.lease.value_or(config_.watchdog_timeout);
  const Clock::time_point called = Clock::now();
  const Clock::time_point deadline = called + wait;
  const std::string thread_owner = owner_token(options.owner);
  const std::string held = held_key(thread_owner, key);
  AcquireStart start(called, deadline);
  if (std::shared_ptr<HeldLock> mine = find_live(held)) {
    start.done = reenter(mine, lease, renewed, called, deadline, throw_on_timeout);
    if (start.done) return start;
  }
  start.attempt = std::make_unique<LockTry>(*this, key, held, acquisition_id(held, thread_owner), lease, renewed);
  return start;
}



void ServiceCore::undo_unacknowledged_grant(std::string_view key, const LockNames& names, const std::string& id) {
  const std::array<std::string_view, 2> args{id, line_settings_};
  try {
    const RedisReply reply = scripts_.run(kReleaseScript, names.script_keys(), args);
    if (reply.is_error()) {
      logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), reply.str);
    }
  } catch (const ConnectionError& e) {
    // Unreleased, it idles out its lease (nobody renews it); the next try, with the same id, adopts it.
    logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), e.what());
  }
}

bool ServiceCore::still_held(const LockNames& names) {
  try {
    const std::array<std::string_view, 2> exists{"EXISTS", names.lock()};
    return is_integer(redis_->command_parts(exists), 1);
  } catch (const ConnectionError&) {
    return false;  // the next try finds out, and waits out the outage as any try does
  }
}

void ServiceCore::leave_line(const LockNames& names, const std::string& id) {
  // Best effort: a waiter left in line costs the others one turn window at most.
  try {
    const std::string window_arg = std::to_string(config_.turn_window.count());
    const std::array<std::string_view, 2> args{id, window_arg};
    scripts_.run(kLeaveScript, names.script_keys(), args);
  } catch (const Error& e) {
    logger_->debug("could not leave the line of '{}': {}", printable(names.lock()), e.what());
  }
}

}  // namespace dlock::detail
