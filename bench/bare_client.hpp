#pragma once
// The bare client: SET key token NX PX lease to acquire, a compare-and-delete
// script to release, by raw hiredis on one connection. One round trip each
// way and the least work Redis can do for a lock with a lease: the floor of a
// non-reentrant lock. Neither reentrant (a second acquire by the same client
// is refused), nor fair (no line), nor fenced (no token a resource can check).
//
// One client is one connection and one lock at a time: use it from one
// thread, and release a key before acquiring the next.

#include <string>

#include "raw_connection.hpp"

namespace bench {

class BareClient {
 public:
  // Connects and loads the release script. Throws std::runtime_error if
  // redis at host:port cannot be reached.
  BareClient(const std::string& host, int port);

  // SET key token NX PX lease_ms with a token new to this acquisition
  // (this client's random prefix and a counter). Returns false if key exists.
  bool acquire(const std::string& key, long long lease_ms);
  // Deletes key if it still holds the token of this client's latest
  // acquisition. Returns false if it did not (the lease ran out, or another
  // client holds the key now).
  bool release(const std::string& key);

  const std::string& token() const { return token_; }  // of the latest acquisition

 private:
  RawConnection connection_;
  std::string release_sha_;
  std::string token_prefix_;
  unsigned long long acquisitions_ = 0;
  std::string token_;
};

}  // namespace bench
