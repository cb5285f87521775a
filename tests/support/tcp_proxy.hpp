#pragma once
// A loopback TCP proxy in front of a test's redis-server, for faults a real
// network has and a local socket does not: it can silently stop forwarding on
// every connection it carries (a peer gone without a FIN or RST, a dead link,
// a command swallowed before it reached the server), while connections made
// afterwards work again.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::test {

class TcpProxy {
 public:
  // Listens on a free 127.0.0.1 port and forwards each connection to 127.0.0.1:target_port.
  explicit TcpProxy(int target_port);
  ~TcpProxy();  // stops forwarding, closes every socket, joins its threads
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }

  // From now on, bytes on the connections open at this moment are read and
  // dropped in both directions; nothing is closed. New connections forward.
  void blackhole_existing();

  // From now on, every chunk of bytes waits this long before it is passed on, in
  // each direction, on every connection: a slow link (a round trip costs twice this).
  void set_delay(int ms) { delay_ms_ = ms; }

  // From now on, every chunk on the connections open at this moment waits
  // this long before it is passed on; connections made afterwards forward at
  // once. Bytes keep their order on each connection, not across them: a
  // command sent later on a new connection can reach the server first.
  void slow_existing(int ms);

  // How many connections the proxy has accepted so far.
  int accepted() const { return accepted_.load(); }

 private:
  struct Link;
  void accept_loop();
  static void pump(const std::shared_ptr<Link>& link, int from, int to, std::atomic<bool>& stopping,
                   const std::atomic<int>& delay_ms);

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> delay_ms_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<Link>> links_;  // guarded by mutex_
  std::vector<std::thread> threads_;          // guarded by mutex_
  std::thread acceptor_;
};

}  // namespace dlock::test
