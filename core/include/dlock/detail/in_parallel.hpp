#pragma once
// Runs one job per node of a Redlock at once, for calls that block (a
// pipeline, a subscription) rather than send and read (RedisExecutor::start).

#include <cstddef>
#include <exception>
#include <future>
#include <string>
#include <system_error>
#include <vector>

namespace dlock::detail {

// Runs job(i) for every i below `count` at once, the last on this thread
// (and any for which no thread could be started, one after another).
// Returns each job's exception (null if it ended normally).
template <typename Job>
std::vector<std::exception_ptr> in_parallel(std::size_t count, Job job) {
  std::vector<std::future<void>> others;
  others.reserve(count);
  std::vector<std::exception_ptr> failures(count);
  std::vector<std::size_t> inline_jobs;  // no thread could be started for them: run here, after the last
  for (std::size_t i = 0; i + 1 < count; ++i) {
    try {
      others.push_back(std::async(std::launch::async, job, i));
    } catch (const std::system_error&) {
      others.emplace_back();
      inline_jobs.push_back(i);
    }
  }
  try {
    if (count > 0) job(count - 1);
  } catch (...) {
    failures[count - 1] = std::current_exception();
  }
  for (std::size_t i : inline_jobs) {
    try {
      job(i);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  }
  for (std::size_t i = 0; i < others.size(); ++i) {
    if (!others[i].valid()) continue;
    try {
      others[i].get();
    } catch (...) {
      failures[i] = std::current_exception();
    }
  }
  return failures;
}

// What an exception says, for messages.
inline std::string message_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown failure";
  }
}

}  // namespace dlock::detail
