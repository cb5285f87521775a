// LockGuard: releasing its hold (throwing from unlock(), only logging from the destructor),
// detach(), and what it tells of the hold: lost or not, its fencing token, its time left.
#include "dlock/lock_guard.hpp"

#include "dlock/detail/acquisition_id.hpp"
#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"

namespace dlock {

LockGuard::LockGuard(std::shared_ptr<detail::ServiceCore> service, std::shared_ptr<detail::Hold> hold)
    : service_(std::move(service)), hold_(std::move(hold)) {}

namespace {

void release_quietly(detail::ServiceCore* service, detail::Hold* hold) noexcept {
  if (!service || !hold || hold->released.load()) return;
  try {
    // Nobody reads the outcome here: the reply is read off this thread (deferred_releases.hpp).
    service->release(*hold, detail::ServiceCore::Release::without_waiting);
  } catch (const LockLostError&) {
    // Logged once already, when the loss was found; a check() that threw
    // LockLostError and unwound through here must not add a second line.
  } catch (const std::exception& e) {
    try {
      service->logger().error("releasing a lock in a guard's destructor failed: {}", e.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

}  // namespace

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    release_quietly(service_.get(), hold_.get());
    service_ = std::move(other.service_);
    hold_ = std::move(other.hold_);
  }
  return *this;
}

LockGuard::~LockGuard() { release_quietly(service_.get(), hold_.get()); }

LockGuard::operator bool() const { return hold_ && !hold_->released.load() && !hold_->lock->is_lost(); }

const std::string& LockGuard::key() const {
  static const std::string kNone;
  return hold_ ? hold_->lock->key : kNone;
}

std::uint64_t LockGuard::fencing_token() const {
  if (!hold_) return 0;
  return service_ ? service_->fencing_token(*hold_) : hold_->lock->fencing_token;
}

bool LockGuard::lost() const {
  if (!hold_) return false;
  // After its own release a guard is done, not lost; the flag still tells if it was lost before.
  return hold_->lock->lost_flag.load() || (!hold_->released.load() && hold_->lock->is_lost());
}

void LockGuard::check() const {
  if (lost()) {
    throw LockLostError(hold_->lock->label() +
                        " was lost (its lease ran out or it was taken over); stop the critical section: another "
                        "holder may be inside it");
  }
}

std::stop_token LockGuard::stop_token() const { return hold_ ? hold_->lock->stop.get_token() : std::stop_token{}; }

Millis LockGuard::remaining() const {
  if (!hold_ || hold_->released.load()) return Millis(0);
  auto left = hold_->lock->valid_until_time() - detail::Clock::now();
  return left > detail::Clock::duration::zero() ? std::chrono::duration_cast<Millis>(left) : Millis(0);
}

void LockGuard::unlock() {
  if (service_ && hold_) service_->release(*hold_);
}

void LockGuard::detach() {
  if (service_ && hold_) service_->release(*hold_, detail::ServiceCore::Release::locally_only);
}

void LockGuard::release_elsewhere(std::function<void(std::exception_ptr)> done, std::shared_ptr<void> keep_alive) {
  if (!hold_ || !service_ || hold_->released.load()) {
    hold_.reset();
    service_.reset();
    if (done) done(nullptr);
    return;
  }
  const std::shared_ptr<detail::ServiceCore> core = service_;
  auto moved = std::make_shared<LockGuard>(std::move(*this));
  core->io_threads().post([moved, done = std::move(done), keep_alive = std::move(keep_alive)]() mutable {
    if (!done) {
      *moved = LockGuard();  // the destructor's release, logging a failure
      keep_alive.reset();
      return;
    }
    std::exception_ptr error;
    try {
      moved->unlock();
    } catch (...) {
      error = std::current_exception();
    }
    done(std::move(error));
    keep_alive.reset();
  });
}

Owner LockGuard::owner() const {
  if (!hold_) throw InvalidArgument("owner() of an empty LockGuard: it holds nothing (check the guard before asking)");
  return detail::owner_of_acquisition(hold_->lock->owner);
}

}  // namespace dlock
