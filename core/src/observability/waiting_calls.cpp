// WaitingCalls: the acquire calls waiting now, by key, for the waiting gauge.
#include "dlock/detail/waiting_calls.hpp"

namespace dlock::detail {

void WaitingCalls::Mark::start(WaitingCalls& calls, std::string_view key) {
  if (calls_ != nullptr) return;
  key_ = std::string(key);
  calls.enter(key_);
  calls_ = &calls;
}

void WaitingCalls::Mark::stop() {
  if (calls_ == nullptr) return;
  calls_->leave(key_);
  calls_ = nullptr;
}

void WaitingCalls::enter(const std::string& key) {
  std::lock_guard lock(mutex_);
  ++by_key_[key];
}

void WaitingCalls::leave(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = by_key_.find(key);
  if (it != by_key_.end() && --it->second == 0) by_key_.erase(it);
}

std::vector<std::pair<std::string, std::uint64_t>> WaitingCalls::by_key() const {
  std::lock_guard lock(mutex_);
  return {by_key_.begin(), by_key_.end()};
}

}  // namespace dlock::detail
