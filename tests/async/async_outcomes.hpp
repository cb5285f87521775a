#pragma once
// What an async operation's completion said, for the async tests: aborted
// (a cancellation), timed out, or the error's text; and a server thawed
// however a test that froze it ends.

#include <asio/error.hpp>
#include <asio/system_error.hpp>

#include <exception>
#include <string>

#include "dlock/errors.hpp"
#include "redis_server.hpp"

namespace dlock::test {

inline bool is_aborted(std::exception_ptr error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const asio::system_error& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

inline bool is_timeout(std::exception_ptr error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const dlock::LockTimeoutError&) {
    return true;
  } catch (...) {
    return false;
  }
}

inline std::string what_of(std::exception_ptr error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "?";
  }
}

struct Thaw {
  RedisServer& redis;
  ~Thaw() { redis.thaw(); }
};

}  // namespace dlock::test
