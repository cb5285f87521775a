#pragma once
// How a connection's thread calls the callbacks other threads registered
// with it (the subscriber's message handlers, the master watch's reset
// listeners): each outside the owner's mutex, so that it may register or
// remove callbacks itself; each looked up again just before its call, so
// that one whose removal returned is never called; and the callback running
// now named, so that a removal can wait its call out. And how the owner
// stops that thread, which may be the one calling.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::detail {

// Calls each of `targets` (id, callback) with `args`, in turn, without
// `mutex`. Just before each call, under `mutex`, `still_registered(id)` is
// asked and `running_id` set to the id (0 again after the call, when
// `finished` is notified). A callback that throws does not stop the others.
template <typename Callback, typename StillRegistered, typename... Args>
void call_each(std::mutex& mutex, std::condition_variable& finished, std::uint64_t& running_id,
               const std::vector<std::pair<std::uint64_t, std::shared_ptr<Callback>>>& targets,
               StillRegistered still_registered, const Args&... args) {
  for (const auto& [id, callback] : targets) {
    {
      std::lock_guard lock(mutex);
      if (!still_registered(id)) continue;
      running_id = id;
    }
    try {
      (*callback)(args...);
    } catch (...) {
      // A throwing callback must not keep the others from being called.
    }
    {
      std::lock_guard lock(mutex);
      running_id = 0;
    }
    finished.notify_all();
  }
}

// Joins the calling thread, told to stop; from that thread itself (its owner
// destroyed from inside one of its callbacks), detaches it instead: it exits
// by itself once the callback returns.
inline void join_unless_calling(std::thread thread) {
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
    return;
  }
  thread.join();
}

}  // namespace dlock::detail
