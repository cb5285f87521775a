#pragma once
// Passes SIGINT, SIGTERM and SIGHUP sent to `dlock run` on to its command.
//
// The handlers are process-wide and may run on any thread (the lock
// service's threads do not block signals); they only read and write lock-free
// atomics and call kill(), both async-signal-safe. A signal that arrives
// before the child exists is kept as pending, and exactly one of the handler
// and attach() passes it on.
//
// Each signal reaches the command once: a terminal's signals (si_code
// SI_KERNEL: ^C, ^\, a hang-up after the session leader left) are not passed
// on while the command shares dlock's process group, which the terminal
// signalled as a whole; everything else is, since spawn() keeps the command
// out of dlock's group unless dlock is a terminal's foreground job. The one
// case left: `kill -SIG -PGID` aimed at a terminal's foreground job reaches a
// command that shares the group twice (nothing in siginfo tells a signal sent
// to a group from one sent to dlock alone).

#include <sys/types.h>

namespace dlock::cli {

class SignalForwarder {
 public:
  // Installs the handlers, except for a signal that was ignored when dlock
  // started (nohup, `&` in a script): that one stays ignored, for the command
  // too. Only one forwarder may exist at a time.
  SignalForwarder();
  // Restores the previous dispositions.
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  // A signal received while there was no child yet (0 if none), consumed.
  // Call before starting the child to decide not to start it at all.
  int take_pending();

  // From now on signals go to `child`; one that came in meanwhile is sent now.
  void attach(pid_t child);
  // Stops forwarding (the child has been reaped; its pid may be reused).
  void detach();

  // Whether `signal` is forwarded (false if it was ignored at start-up).
  static bool forwards(int signal);
};

}  // namespace dlock::cli
