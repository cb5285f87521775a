#pragma once
// How the examples turn dlock errors into a message and a sysexits code.

#include <exception>
#include <functional>
#include <mutex>

namespace example {

// Runs `body` and returns its exit status; a ConfigError gives 78
// (EX_CONFIG), a ConnectionError 69 (EX_UNAVAILABLE), any other error 1,
// each after a one-line message on stderr.
int run_reporting_errors(const std::function<int()>& body);

// The first error of a process' worker threads, thrown again on the thread
// that joins them: an exception leaving a std::thread would abort the
// process without a word, and run_reporting_errors then says what failed.
class FirstWorkerError {
 public:
  // Runs a worker's body; its error, if it is the first, is kept.
  void run(const std::function<void()>& body) noexcept;
  // After the join: throws the first error kept, if any.
  void rethrow_if_any();

 private:
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace example
