#include "event.hpp"

#include <time.h>

#include <charconv>
#include <vector>

namespace dlock::history {
namespace {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::string unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char next = text[++i];
      out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
    } else {
      out += text[i];
    }
  }
  return out;
}

template <typename Number>
std::optional<Number> to_number(std::string_view s) {
  Number value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string Event::get(const std::string& key, const std::string& fallback) const {
  auto it = fields.find(key);
  return it == fields.end() ? fallback : it->second;
}

std::int64_t Event::number(const std::string& key, std::int64_t fallback) const {
  auto it = fields.find(key);
  if (it == fields.end()) return fallback;
  return to_number<std::int64_t>(it->second).value_or(fallback);
}

std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::string format_event(const Event& event) {
  std::string line = std::to_string(event.t_ns) + ' ' + event.who + ' ' + std::to_string(event.pid) + ' ' + event.kind;
  for (const auto& [key, value] : event.fields) line += ' ' + key + '=' + value;
  if (!event.text.empty()) line += " text=" + escape(event.text);
  return line;
}

std::optional<Event> parse_event(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  Event event;
  std::size_t text_at = line.find(" text=");
  if (text_at != std::string_view::npos) {
    event.text = unescape(line.substr(text_at + 6));
    line = line.substr(0, text_at);
  }
  std::vector<std::string_view> words;
  while (!line.empty()) {
    std::size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    if (!word.empty()) words.push_back(word);
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  if (words.size() < 4) return std::nullopt;
  auto t = to_number<std::int64_t>(words[0]);
  auto pid = to_number<long>(words[2]);
  if (!t || !pid) return std::nullopt;
  event.t_ns = *t;
  event.who = words[1];
  event.pid = *pid;
  event.kind = words[3];
  for (std::size_t i = 4; i < words.size(); ++i) {
    std::size_t eq = words[i].find('=');
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    event.fields.emplace(words[i].substr(0, eq), words[i].substr(eq + 1));
  }
  return event;
}

}  // namespace dlock::history
