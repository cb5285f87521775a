#pragma once
// A scratch directory for one test (or one test program, held in a static):
// config files, scripts, output files; removed with everything in it.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace dlock::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dlock-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

  std::string write(const std::string& name, const std::string& text, bool executable = false) const {
    const std::string path = file(name);
    std::ofstream(path) << text;
    if (executable) {
      std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add);
    }
    return path;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace dlock::test
