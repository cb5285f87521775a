#pragma once
// Whether the calling thread runs an event loop the library was told how to
// recognise (<dlock/asio.hpp> registers standalone Asio's: a thread inside
// io_context::run() or a thread_pool). A blocking acquisition by the
// thread's owner there is refused (ServiceCore::refuse_thread_owner_on_event_loop):
// every coroutine on that thread would re-enter the others' holds, and the
// wait would stall the loop. The library itself needs no Asio for it.

namespace dlock::detail {

using EventLoopCheck = bool (*)();

// The last registered check wins; nullptr turns the refusal off.
void set_event_loop_check(EventLoopCheck check);
// False while no check is registered.
bool on_event_loop_thread();

}  // namespace dlock::detail
