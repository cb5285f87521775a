#pragma once
// The watch on an executor's masters (RedisExecutor::watch_resets): it tells
// its listeners, the watchdog among them, when a master may have forgotten
// the locks it held, so that their holders are told within a round trip of
// that master answering again rather than at their next renewal (a third of
// a lease away).
//
// It keeps a connection of its own open to each master, from the first
// watch() on, on a thread of its own. A master counts as reset when
// - its connection broke, or could not be opened, and the server answering
//   again has another run_id (INFO server) than before, or does not say
//   (INFO refused, as for a user without +info): a restart, or another
//   server in its place (a Sentinel failover: the connection follows the
//   master, see EndpointSource);
// - it was not a master when the watch began and is one now (a cluster
//   failover promoted it, or a node joined).
// A connection that broke and finds the same run_id (CLIENT KILL, a network
// blip) is no reset: that server kept its data. A master answers again once
// it answers PING with anything but a "not now" state (LOADING: its data is
// not in yet), so each reset is told once, when a renewal can get a verdict.
//
// While a master is unreachable its connection is dialled again every 50 ms
// (a restart is seen that soon after the server accepts connections) and the
// executor is asked every 250 ms to look for its masters again (a failover
// may have moved them). A connection silent for a second is sent a PING,
// which must be answered within the command timeout.
//
// What it costs Redis: a connection per master per service, a PING per
// second of silence on it, a PING and an INFO server per reconnect.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// A master as the watch dials it.
struct WatchedMaster {
  std::string name;    // the same master from call to call: its address, or a fixed name for one that moves
  RedisConfig config;  // how to dial it; an endpoint_source in it is followed
};

class MasterWatch {
 public:
  // What the watch asks its executor, on the watch's thread.
  struct Masters {
    std::function<std::vector<WatchedMaster>()> list;  // the masters known now; no I/O
    // A master is unreachable: look for the masters again (may do I/O, bounded by
    // the command timeout). Empty when there is nothing to look for (one server).
    std::function<void()> look_again;
  };

  // Dials nothing yet.
  explicit MasterWatch(Masters masters);
  // Stops and joins the thread (in a fork child, where it does not run, leaves it).
  ~MasterWatch();
  MasterWatch(const MasterWatch&) = delete;
  MasterWatch& operator=(const MasterWatch&) = delete;

  // As RedisExecutor::watch_resets; the first call starts the thread.
  Subscription watch(RedisExecutor::ResetHandler on_reset);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace dlock::detail
