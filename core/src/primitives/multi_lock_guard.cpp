// MultiLockGuard: one LockGuard per key, released last taken first; one stop token that
// fires when any of them is lost; the set's fencing tokens, check() and time left.
#include "dlock/multi_lock_guard.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "dlock/detail/key_label.hpp"
#include "dlock/errors.hpp"

namespace dlock {

// One stop source for the set, requested by whichever of its locks is lost
// first (on the watchdog's thread, or the thread that found the loss).
struct MultiLockGuard::LossSignal {
  std::stop_source stop;
  std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> forwarders;
};

MultiLockGuard::MultiLockGuard(std::vector<LockGuard> guards)
    : guards_(std::move(guards)), loss_(std::make_shared<LossSignal>()) {
  loss_->forwarders.reserve(guards_.size());
  for (const LockGuard& guard : guards_) {
    // The callback holds the stop source alone, not the signal, so the signal owns no cycle.
    loss_->forwarders.push_back(std::make_unique<std::stop_callback<std::function<void()>>>(
        guard.stop_token(), std::function<void()>([stop = loss_->stop]() mutable { stop.request_stop(); })));
  }
}

MultiLockGuard& MultiLockGuard::operator=(MultiLockGuard&& other) noexcept {
  if (this != &other) {
    while (!guards_.empty()) guards_.pop_back();  // the last taken released first
    guards_ = std::move(other.guards_);
    loss_ = std::move(other.loss_);
  }
  return *this;
}

MultiLockGuard::~MultiLockGuard() {
  while (!guards_.empty()) guards_.pop_back();
}

MultiLockGuard::operator bool() const {
  return !guards_.empty() && std::all_of(guards_.begin(), guards_.end(), [](const LockGuard& g) { return bool(g); });
}

const LockGuard& MultiLockGuard::guard(std::string_view key) const {
  for (const LockGuard& g : guards_) {
    if (g.key() == key) return g;
  }
  throw InvalidArgument(detail::lock_label(key) + " is not in this multi-lock's set of " +
                        std::to_string(guards_.size()) + " keys; ask for one of the keys passed to lock_all");
}

std::uint64_t MultiLockGuard::fencing_token(std::string_view key) const { return guard(key).fencing_token(); }

bool MultiLockGuard::lost() const {
  return std::any_of(guards_.begin(), guards_.end(), [](const LockGuard& g) { return g.lost(); });
}

void MultiLockGuard::check() const {
  for (const LockGuard& g : guards_) g.check();
}

std::stop_token MultiLockGuard::stop_token() const { return loss_ ? loss_->stop.get_token() : std::stop_token{}; }

Millis MultiLockGuard::remaining() const {
  if (guards_.empty()) return Millis(0);
  Millis least = Millis::max();
  for (const LockGuard& g : guards_) least = std::min(least, g.remaining());
  return least;
}

void MultiLockGuard::unlock() {
  std::exception_ptr first_failure;
  for (auto it = guards_.rbegin(); it != guards_.rend(); ++it) {
    try {
      it->unlock();
    } catch (const Error&) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void MultiLockGuard::detach() {
  for (LockGuard& g : guards_) g.detach();
}

}  // namespace dlock
