// The pthread_atfork handlers: the fork generation counted in each child, and the
// registered mutexes locked just before fork() and unlocked on both sides after it.
#include "dlock/detail/fork_guard.hpp"

#include <pthread.h>

#include <atomic>
#include <set>

namespace dlock::detail {
namespace {

std::atomic<unsigned> g_generation{0};  // atomic: read by any thread, written in a fork child
std::mutex g_registry_mutex;             // guards g_registry; held from prepare to parent/child
std::set<std::mutex*>& registry() {      // guarded by g_registry_mutex
  // Never destroyed: a thread still ending at exit (a pool's last owner)
  // may erase from it after static destructors ran (a race TSan found).
  static auto* const mutexes = new std::set<std::mutex*>();
  return *mutexes;
}

void before_fork() {
  g_registry_mutex.lock();
  for (std::mutex* mutex : registry()) mutex->lock();
}

void after_fork_in_parent() {
  for (std::mutex* mutex : registry()) mutex->unlock();
  g_registry_mutex.unlock();
}

void after_fork_in_child() {
  g_generation.fetch_add(1);
  after_fork_in_parent();
}

// Registered once, on first use, so a program that never makes a pool pays nothing.
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); });
}

}  // namespace

unsigned fork_generation() {
  install_handlers();
  return g_generation.load(std::memory_order_relaxed);
}

void hold_across_fork(std::mutex& mutex) {
  install_handlers();
  std::lock_guard lock(g_registry_mutex);
  registry().insert(&mutex);
}

void release_across_fork(std::mutex& mutex) {
  std::lock_guard lock(g_registry_mutex);
  registry().erase(&mutex);
}

}  // namespace dlock::detail
