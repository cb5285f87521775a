// Starting COMMAND for `dlock run`: fork and exec with signals reset, its own process group
// unless dlock is in the terminal's foreground, SIGKILL if dlock dies; then waiting and reaping.
#include "child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "exit_codes.hpp"

namespace dlock::cli {

namespace {

std::set<int> open_fds() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != own) fds.insert(fd);
  }
  ::closedir(dir);
  return fds;
}

}  // namespace

InheritedFds::InheritedFds() : fds_(open_fds()) {}

void InheritedFds::close_others_on_exec() const {
  for (int fd : open_fds()) {
    if (fds_.count(fd)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

void reset_inherited_signal_state() {
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

namespace {

// Whether dlock's process group is the foreground group of its controlling terminal.
bool in_terminal_foreground() {
  const int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return false;
  const bool foreground = ::tcgetpgrp(tty) == ::getpgrp();
  ::close(tty);
  return foreground;
}

// Between fork and exec, in a copy of a threaded process: async-signal-safe
// calls only. Reports a failed exec's errno on `report` and exits.
[[noreturn]] void exec_child(char* const* argv, pid_t parent, bool own_group, const sigset_t& mask, int report) {
  // All signals are blocked here (the parent blocked them around fork), so
  // none can run dlock's handlers in this copy before they are reset.
  for (int signal = 1; signal < NSIG; ++signal) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;
    const bool handled = (current.sa_flags & SA_SIGINFO) != 0 || (current.sa_handler != SIG_DFL &&
                                                                  current.sa_handler != SIG_IGN);
    if (handled) ::signal(signal, SIG_DFL);
  }
  if (own_group) ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // dlock may have died before prctl took effect: then nothing would ever kill us.
  if (::getppid() != parent) ::_exit(kExitSignalBase + SIGKILL);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execvp(argv[0], argv);
  const int error = errno;
  [[maybe_unused]] const ssize_t written = ::write(report, &error, sizeof error);
  ::_exit(kExitNotFound);
}

// The errno a failed exec wrote on `report`, or 0 once exec closed it.
int exec_error(int report) {
  int error = 0;
  ssize_t got;
  while ((got = ::read(report, &error, sizeof error)) < 0 && errno == EINTR) {
  }
  return got == static_cast<ssize_t>(sizeof error) ? error : 0;
}

}  // namespace

SpawnResult spawn(const std::vector<std::string>& argv, const InheritedFds& inherited) {
  std::vector<char*> pointers;
  for (const auto& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  inherited.close_others_on_exec();
  const bool own_group = !in_terminal_foreground();

  SpawnResult result;
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    result.error = errno;
    return result;
  }
  sigset_t all;
  sigset_t mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(pointers.data(), parent, own_group, mask, report[1]);
  const int fork_error = errno;
  // Also here: whichever of parent and child runs first, COMMAND is in its group before dlock goes on.
  if (pid > 0 && own_group) ::setpgid(pid, pid);
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    result.error = fork_error;
    return result;
  }
  result.error = exec_error(report[0]);
  ::close(report[0]);
  if (result.error != 0) {
    ::waitpid(pid, nullptr, 0);
    return result;
  }
  result.pid = pid;
  return result;
}

void wait_until_ended(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitid");
  }
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
  }
  if (WIFSIGNALED(status)) return kExitSignalBase + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace dlock::cli
