#pragma once
// Every error dlock throws derives from dlock::Error. A message says what
// happened, to which key or setting, and what to do about it.

#include <chrono>
#include <stdexcept>
#include <string>

namespace dlock {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A configuration file or value is wrong. Messages start "FILE:LINE:" and name
// the setting by its dotted path.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Redis could not be reached, refused authentication, or did not answer in time.
class ConnectionError : public Error {
 public:
  using Error::Error;
  ConnectionError(const std::string& what, bool may_have_run) : Error(what), may_have_run_(may_have_run) {}
  // Whether the call that failed may have reached Redis and run there: false
  // only when it failed before any of it was sent (connecting, the TLS
  // handshake, AUTH, SELECT); true when unknown.
  bool may_have_run() const { return may_have_run_; }

 private:
  bool may_have_run_ = true;
};

// Redis refused the login (WRONGPASS, NOAUTH): a wrong or missing
// redis.password or redis.username (or user info in redis.url). Thrown at
// connect, before anything of the caller's was sent; trying again does not
// help until the setting is fixed.
class AuthenticationError : public ConnectionError {
 public:
  explicit AuthenticationError(const std::string& what) : ConnectionError(what, false) {}
};

// Over a Redlock, enough nodes answered, but too few of them may vote yet:
// the others restarted (or started) less than
// redis.redlock.restarted_node_delay_ms ago and sit out the rest of it, as
// they may have forgotten locks they granted. The same call succeeds from
// votes_from() on, unless a node restarts again.
class RestartDelayError : public ConnectionError {
 public:
  RestartDelayError(const std::string& what, std::chrono::system_clock::time_point votes_from)
      : ConnectionError(what), votes_from_(votes_from) {}
  // When enough of the nodes that answered will have sat out their delay to make a majority.
  std::chrono::system_clock::time_point votes_from() const { return votes_from_; }

 private:
  std::chrono::system_clock::time_point votes_from_;
};

// lock() did not get the lock within its wait.
class LockTimeoutError : public Error {
 public:
  using Error::Error;
};

// unlock(key) was called by a thread that holds no hold of that key.
class NotOwnerError : public Error {
 public:
  using Error::Error;
};

// The lock stopped being this holder's before it was released: its lease ran
// out, or the key was deleted or taken over behind its back.
class LockLostError : public Error {
 public:
  using Error::Error;
};

// A caller passed a value dlock cannot use (empty key, lease <= 0, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Redis answered with something a dlock script never returns on its own, such
// as a WRONGTYPE error because a user's key sits at the lock's name.
class RedisError : public Error {
 public:
  using Error::Error;
};

}  // namespace dlock
