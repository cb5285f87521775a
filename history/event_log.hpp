#pragma once
// Appending events to a history file, and reading them back.
//
// A worker may be SIGKILLed at any instruction, so each event goes to the
// file in one write(2) on an O_APPEND descriptor the moment it happens: no
// user-space buffer to lose, and a line is either whole or (at worst) a torn
// last line, which the reader skips.

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "event.hpp"

namespace dlock::history {

class EventLog {
 public:
  // Opens (creating or appending to) `path`; throws std::runtime_error if it cannot.
  EventLog(const std::filesystem::path& path, std::string who);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Appends one event of this process. The stamp is taken under the same
  // mutex as the write, so the file is in time order even when the on_lost
  // hook's thread and the worker's thread write at once. Returns the stamp.
  std::int64_t append(const std::string& kind, std::map<std::string, std::string> fields = {},
                      const std::string& text = "");
  // As append(), with a stamp taken earlier (a fault whose window is only
  // known once it is over).
  void append_at(std::int64_t t_ns, const std::string& kind, std::map<std::string, std::string> fields = {},
                 const std::string& text = "");

 private:
  void write_line(const Event& event);

  int fd_ = -1;
  std::string who_;
  long pid_;
  std::mutex mutex_;  // one line at a time, stamped in order
};

// Every event of a file, torn or foreign lines skipped; throws
// std::runtime_error if the file cannot be read.
std::vector<Event> read_events(const std::filesystem::path& path);

// The last `count` events of a file, reading only its tail: the driver asks
// this often, of files that grow for minutes. Empty if unreadable.
std::vector<Event> last_events(const std::filesystem::path& path, std::size_t count);

}  // namespace dlock::history
