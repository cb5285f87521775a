// The on_lost hooks' thread: hooks run one at a time in the order posted, one that
// throws logged, and the thread left to end by itself when a hook destroys its owner.
#include "dlock/detail/lost_notifier.hpp"

#include "dlock/detail/key_label.hpp"

namespace dlock::detail {

LostNotifier::LostNotifier(spdlog::logger& logger) : state_(std::make_shared<State>()) { state_->logger = &logger; }

LostNotifier::~LostNotifier() {
  {
    std::lock_guard guard(state_->mutex);
    state_->stopping = true;
    state_->logger = nullptr;
  }
  state_->posted.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void LostNotifier::start() {
  std::lock_guard guard(state_->mutex);
  if (!state_->stopping && !thread_.joinable()) thread_ = std::thread(&LostNotifier::run, state_);
}

void LostNotifier::post(Hook hook, std::string key) {
  {
    std::lock_guard guard(state_->mutex);
    if (state_->stopping) return;
    state_->queue.emplace_back(std::move(hook), std::move(key));
    if (!thread_.joinable()) thread_ = std::thread(&LostNotifier::run, state_);
  }
  state_->posted.notify_one();
}

void LostNotifier::run(const std::shared_ptr<State>& state) {
  std::unique_lock guard(state->mutex);
  for (;;) {
    state->posted.wait(guard, [&] { return state->stopping || !state->queue.empty(); });
    if (state->queue.empty()) return;  // stopping, and nothing left to tell
    auto [hook, key] = std::move(state->queue.front());
    state->queue.pop_front();
    guard.unlock();
    std::string failure;
    try {
      hook(key);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "a non-standard exception";
    }
    // Destroyed here, outside the mutex: a hook's captures may hold the last reference to a service.
    hook = nullptr;
    guard.lock();
    if (!failure.empty() && state->logger) {
      state->logger->error("on_lost hook for {} threw: {}", lock_label(key), failure);
    }
  }
}

}  // namespace dlock::detail
