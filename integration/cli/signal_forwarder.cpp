// The signal handlers of `dlock run`: SIGINT, SIGTERM and SIGHUP passed on to COMMAND once,
// kept pending until it exists, and not sent again when the terminal already reached it.
#include "signal_forwarder.hpp"

#include <signal.h>

#include <array>
#include <atomic>
#include <cerrno>

namespace dlock::cli {

namespace {

constexpr std::array<int, 3> kForwarded = {SIGINT, SIGTERM, SIGHUP};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "signal handlers may only touch lock-free atomics");
std::atomic<pid_t> g_child{0};   // atomic: the child to forward to, 0 before attach / after detach
std::atomic<int> g_pending{0};   // atomic: a signal that came before the child existed
std::array<struct sigaction, kForwarded.size()> g_previous{};
std::array<bool, kForwarded.size()> g_installed{};

// Whether `signal`, sent to dlock, reached COMMAND (`child`; 0 before it
// runs, when a signal is kept pending) directly too, so that passing it on would deliver it twice. A
// process's kill() does not say whether it named dlock alone or its group;
// spawn() keeps COMMAND out of dlock's group but when dlock is a terminal's
// foreground job, where only the terminal sends to the whole group.
bool reached_command_directly(int signal, const siginfo_t* info, pid_t child) {
  if (child <= 0 || info == nullptr || info->si_code != SI_KERNEL) return false;  // not from a terminal
  // A terminal's keys go to its foreground group: to COMMAND only if it is in dlock's.
  if (::getpgid(child) != ::getpgrp()) return false;
  // A hang-up goes to the session leader alone (the group gets it when that leader exits).
  if (signal == SIGHUP && ::getsid(0) == ::getpid()) return false;
  return true;
}

void forward(int signal, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (reached_command_directly(signal, info, g_child.load())) {
    errno = saved_errno;
    return;
  }
  if (pid_t child = g_child.load(); child > 0) {
    ::kill(child, signal);
  } else {
    // attach() may have stored the pid between our load and this store; then
    // whichever of us takes the pending signal sends it, and only once.
    g_pending.store(signal);
    child = g_child.load();
    if (child > 0 && g_pending.exchange(0) != 0) ::kill(child, signal);
  }
  errno = saved_errno;
}

}  // namespace

SignalForwarder::SignalForwarder() {
  g_child.store(0);
  g_pending.store(0);
  for (std::size_t i = 0; i < kForwarded.size(); ++i) {
    struct sigaction current {};
    ::sigaction(kForwarded[i], nullptr, &current);
    g_installed[i] = current.sa_handler != SIG_IGN;
    if (!g_installed[i]) continue;
    struct sigaction action {};
    action.sa_sigaction = forward;
    action.sa_flags = SA_SIGINFO;  // no SA_RESTART: waitpid sees EINTR and simply retries
    sigemptyset(&action.sa_mask);
    ::sigaction(kForwarded[i], &action, &g_previous[i]);
  }
}

SignalForwarder::~SignalForwarder() {
  detach();
  for (std::size_t i = 0; i < kForwarded.size(); ++i) {
    if (g_installed[i]) ::sigaction(kForwarded[i], &g_previous[i], nullptr);
    g_installed[i] = false;
  }
}

int SignalForwarder::take_pending() { return g_pending.exchange(0); }

void SignalForwarder::attach(pid_t child) {
  g_child.store(child);
  if (const int signal = g_pending.exchange(0); signal != 0) ::kill(child, signal);
}

void SignalForwarder::detach() { g_child.store(0); }

bool SignalForwarder::forwards(int signal) {
  for (std::size_t i = 0; i < kForwarded.size(); ++i) {
    if (kForwarded[i] == signal) return g_installed[i];
  }
  return false;
}

}  // namespace dlock::cli
