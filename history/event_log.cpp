#include "event_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace dlock::history {

EventLog::EventLog(const std::filesystem::path& path, std::string who) : who_(std::move(who)), pid_(::getpid()) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open history file " + path.string() + ": " + std::strerror(errno));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::int64_t EventLog::append(const std::string& kind, std::map<std::string, std::string> fields,
                              const std::string& text) {
  std::lock_guard guard(mutex_);
  Event event{monotonic_ns(), who_, pid_, kind, std::move(fields), text};
  write_line(event);
  return event.t_ns;
}

void EventLog::append_at(std::int64_t t_ns, const std::string& kind, std::map<std::string, std::string> fields,
                         const std::string& text) {
  std::lock_guard guard(mutex_);
  write_line(Event{t_ns, who_, pid_, kind, std::move(fields), text});
}

void EventLog::write_line(const Event& event) {
  const std::string line = format_event(event) + '\n';
  // One write for the whole line; a short write (disk full) is retried for the rest.
  std::size_t done = 0;
  for (int attempt = 0; attempt < 100 && done < line.size(); ++attempt) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno != EINTR) break;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

std::vector<Event> read_events(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read history file " + path.string());
  std::vector<Event> events;
  std::string line;
  while (std::getline(in, line)) {
    if (auto event = parse_event(line)) events.push_back(std::move(*event));
  }
  return events;
}

std::vector<Event> last_events(const std::filesystem::path& path, std::size_t count) {
  constexpr off_t kTail = 4096;  // far more than `count` lines of a worker
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const off_t from = std::max<off_t>(0, size - kTail);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  const ssize_t got = ::pread(fd, tail.data(), tail.size(), from);
  ::close(fd);
  if (got <= 0) return {};
  tail.resize(static_cast<std::size_t>(got));
  std::vector<Event> events;
  std::size_t start = from > 0 ? tail.find('\n') + 1 : 0;  // the first line may be cut
  while (start < tail.size()) {
    std::size_t end = tail.find('\n', start);
    if (end == std::string::npos) break;  // a line still being written
    if (auto event = parse_event(std::string_view(tail).substr(start, end - start))) events.push_back(*event);
    start = end + 1;
  }
  if (events.size() > count) events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(count));
  return events;
}

}  // namespace dlock::history
