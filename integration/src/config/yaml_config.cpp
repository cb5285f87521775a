// load_config: reads the YAML file, walks it against the known settings and
// reports anything it cannot use as "FILE:LINE: setting: problem; what to do".
// The walk of the document is yaml_document.cpp's, the settings yaml_settings.cpp's.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include "config/yaml_reading.hpp"
#include "dlock/config.hpp"
#include "dlock/errors.hpp"

namespace dlock {
namespace {

using detail::kind_of;
using detail::join;
using detail::read_document;
using detail::Source;
using detail::unknown_name_hint;

// Reading a config is a start-up step; a file this big is the wrong path, and
// yaml-cpp would otherwise spend seconds and a lot of memory on it.
constexpr std::size_t max_file_bytes = 1024 * 1024;

// The node at the dotted `section` path ("dlock", "services.dlock") of a
// file that holds other settings too; everything outside it is the
// service's own business and is not looked at.
YAML::Node find_section(const YAML::Node& root, const std::string& section, const Source& source) {
  YAML::Node node = root;
  std::string path;
  for (std::size_t start = 0; start <= section.size();) {
    const std::size_t dot = std::min(section.find('.', start), section.size());
    const std::string name = section.substr(start, dot - start);
    start = dot + 1;
    const std::string where = path.empty() ? "at the top level" : "in " + path;
    path += (path.empty() ? "" : ".") + name;
    if (!node.IsMap() && !node.IsNull()) {  // null: an empty file or section, with no sections at all
      source.fail(node, "looking for the section " + path + ": expected a map " + where + ", got " + kind_of(node));
    }
    std::vector<std::string_view> names;
    std::optional<YAML::Node> found;
    int found_line = 0;
    for (auto it = node.begin(); node.IsMap() && it != node.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      if (it->first.Scalar() == name) {
        if (found) {
          source.fail(it->first, path + ": set twice (first at line " + std::to_string(found_line) +
                                     "); keep one of them");
        }
        found = it->second;
        found_line = Source::line_of(it->first);
      } else {
        names.push_back(it->first.Scalar());
      }
    }
    if (!found) {
      source.fail_whole("no section " + path + " " + where + unknown_name_hint(name, names) +
                        (names.empty() ? "" : "; found " + join(names)) + "; add a `" + name +
                        ":` section with dlock's settings (redis, lock, logging)");
    }
    node = *found;
  }
  return node;
}

// The environment wins over the file, so a deployment can point the same
// file at another server or inject a secret.
void apply_environment(const Source& source, Config& config) {
  try {
    apply_environment_overrides(config);
  } catch (const ConfigError& e) {
    source.fail_whole(e.what());
  }
}

[[noreturn]] void fail_too_large(const Source& source) {
  source.fail_whole("the config is larger than 1 MiB; a dlock config is a few lines, so check that the path "
                    "names the right file");
}

// Reads the whole file with POSIX calls, which report why a read failed
// (errno) where an ifstream only says that it did.
std::string read_file(const std::filesystem::path& path, const Source& source) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer that never comes.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    source.fail_whole(std::string("cannot open the config file: ") + std::strerror(errno) +
                      "; check the path given for the dlock config");
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode))) {
    ::close(fd);
    source.fail_whole("the config path is a pipe or socket, not a file; give the path of a YAML file");
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      source.fail_whole(std::string("cannot read the config file: ") + std::strerror(error) +
                        "; give the path of a readable YAML file");
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_file_bytes) {
      ::close(fd);
      fail_too_large(source);
    }
  }
  ::close(fd);
  return text;
}

// yaml-cpp reports an indentation tab as "illegal map value" and the like,
// which does not say what to change.
std::string tab_hint(const std::string& text, int line) {
  std::size_t start = 0;
  for (int i = 0; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (line < 0 || start == std::string::npos) return "";
  const std::size_t indent_end = text.find_first_not_of(" \t", start);
  const bool tab_in_indent =
      text.find('\t', start) < std::min(indent_end, text.find('\n', start));
  return tab_in_indent ? " (this line is indented with a tab; YAML allows only spaces)" : "";
}

// Listens to a parse without building anything; only the second document's start matters.
class SecondDocumentFinder : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> second_start;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

// The start of a second document, if the text has one. At most two
// documents are parsed: yaml-cpp 0.7's LoadAll never ends on some malformed
// input (a leading ',') while its parser keeps yielding empty documents.
std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  SecondDocumentFinder finder;
  if (parser.HandleNextDocument(finder)) parser.HandleNextDocument(finder);
  return finder.second_start;
}

// The text of a config, its source named for messages, read as documented in config.hpp.
Config parse(const std::string& text, const Source& source, const std::string& section) {
  Config config;
  try {
    if (text.size() > max_file_bytes) fail_too_large(source);
    const YAML::Node document = YAML::Load(text);
    if (auto second = second_document(text)) {
      source.fail(second->line + 1, "a second YAML document (after \"---\"); put all settings in one document");
    }
    if (section.empty()) {
      read_document(document, "", source, config);
    } else {
      read_document(find_section(document, section, source), section, source, config);
    }
    apply_environment(source, config);
  } catch (const ConfigError&) {
    throw;
  } catch (const YAML::Exception& e) {
    // ParserException and friends: the mark is 0-based, or -1 when unknown.
    source.fail(e.mark.line + 1, "malformed YAML: " + e.msg + tab_hint(text, e.mark.line));
  } catch (const std::exception& e) {
    source.fail_whole(std::string("cannot load the config: ") + e.what());
  }
  return config;
}

void check_section_name(const std::string& section, const Source& source) {
  const bool empty_part = section.empty() || section.front() == '.' || section.back() == '.' ||
                          section.find("..") != std::string::npos;
  if (empty_part) {
    source.fail_whole("the section to read, \"" + section + "\", is not a dotted path such as \"dlock\" or "
                      "\"services.dlock\"; pass one, or none to read the whole file");
  }
}

}  // namespace

const char* mode_name(RedisMode mode) {
  switch (mode) {
    case RedisMode::sentinel: return "sentinel";
    case RedisMode::cluster: return "cluster";
    case RedisMode::redlock: return "redlock";
    default: return "standalone";
  }
}

std::string to_string(const NodeAddress& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

Config load_config(const std::filesystem::path& yaml) { return load_config(yaml, std::string()); }

Config load_config(const std::filesystem::path& yaml, const std::string& section) {
  const Source source(yaml.string());
  if (!section.empty()) check_section_name(section, source);
  return parse(read_file(yaml, source), source, section);
}

Config parse_config(const std::string& yaml_text, const std::string& source_name, const std::string& section) {
  const Source source(source_name);
  if (!section.empty()) check_section_name(section, source);
  return parse(yaml_text, source, section);
}

}  // namespace dlock
