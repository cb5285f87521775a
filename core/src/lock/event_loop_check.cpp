// The registered event-loop check (event_loop_check.hpp).
#include "dlock/detail/event_loop_check.hpp"

#include <atomic>

namespace dlock::detail {
namespace {

std::atomic<EventLoopCheck> registered_check{nullptr};

}  // namespace

void set_event_loop_check(EventLoopCheck check) { registered_check.store(check, std::memory_order_release); }

bool on_event_loop_thread() {
  const EventLoopCheck check = registered_check.load(std::memory_order_acquire);
  return check != nullptr && check();
}

}  // namespace dlock::detail
