#pragma once
// Starting COMMAND for `dlock run` and waiting for it.

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace dlock::cli {

// The file descriptors open when dlock started, which COMMAND should inherit
// (`dlock run k -- cmd 3<file` works). Descriptors opened later are the lock
// service's Redis sockets (hiredis does not set close-on-exec): spawn() keeps
// them from COMMAND.
class InheritedFds {
 public:
  InheritedFds();  // snapshot of /proc/self/fd
  // Sets FD_CLOEXEC on every descriptor open now that was not in the snapshot.
  void close_others_on_exec() const;

 private:
  std::set<int> fds_;
};

// Undoes what a parent may leave to dlock across exec that would break
// waiting for COMMAND: SIGCHLD ignored (the kernel then reaps children itself
// and waitid fails with ECHILD) and blocked signals. Call first thing in main,
// before any thread starts (threads inherit the mask).
void reset_inherited_signal_state();

struct SpawnResult {
  pid_t pid = -1;  // > 0 on success
  int error = 0;   // errno-style cause when the command could not be started
};

// Starts argv[0] (searched in PATH unless it contains a slash) with argv and
// the current environment, after inherited.close_others_on_exec(). Handled
// signals are reset to their default disposition in the child; ignored ones
// stay ignored.
//
// COMMAND never outlives dlock: it is made to get SIGKILL when dlock dies,
// however it dies (PR_SET_PDEATHSIG). That signal follows the thread that
// forked, so call this from the main thread, which lives as long as dlock.
//
// COMMAND gets a process group of its own, so a signal sent to dlock's group
// (a supervisor's `kill -TERM -PGID`) reaches it only once, passed on by
// dlock; except when dlock runs in the foreground of a terminal: then COMMAND
// stays in dlock's group, where the terminal's keys, job control and reads
// reach it as they would without dlock.
SpawnResult spawn(const std::vector<std::string>& argv, const InheritedFds& inherited);

// Blocks until `pid` has ended, retrying on EINTR (a forwarded signal
// interrupts the wait), but leaves it unreaped: until reap(), its pid cannot
// be reused, so a late kill() cannot hit another process.
void wait_until_ended(pid_t pid);

// Reaps `pid` and returns its shell-style status: the exit status, or 128 + N
// if signal N killed it.
int reap(pid_t pid);

}  // namespace dlock::cli
