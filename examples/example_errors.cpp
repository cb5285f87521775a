#include "example_errors.hpp"

#include <iostream>

#include "dlock/errors.hpp"

namespace example {

int run_reporting_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const dlock::ConfigError& e) {
    std::cerr << "config error: " << e.what() << "\n";
    return 78;
  } catch (const dlock::ConnectionError& e) {
    std::cerr << "redis unreachable: " << e.what() << "\n";
    return 69;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

void FirstWorkerError::run(const std::function<void()>& body) noexcept {
  try {
    body();
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!first_) first_ = std::current_exception();
  }
}

void FirstWorkerError::rethrow_if_any() {
  std::lock_guard lock(mutex_);
  if (first_) std::rethrow_exception(first_);
}

}  // namespace example
