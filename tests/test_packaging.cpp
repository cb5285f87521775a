// dlock as an installed package: `cmake --install` into a temporary prefix,
// then tests/consumer, a project outside the tree, builds against it with
// find_package(dlock) and with pkg-config, as a user's service would.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "dlock/version.hpp"
#include "shell_command.hpp"

namespace fs = std::filesystem;

using Run = dlock::test::CommandResult;

namespace {

Run shell(const std::string& command) { return dlock::test::run_shell(command); }


std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// The build tree installed into a fresh temporary prefix, removed afterwards.
class InstalledTree {
 public:
  InstalledTree() {
    static std::atomic<int> counter{0};
    prefix_ = fs::temp_directory_path() /
              ("dlock-install-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(prefix_);
    const auto install = shell(std::string("'" CMAKE_COMMAND "' --install '" DLOCK_BUILD_DIR "' --prefix ") +
                               quoted(prefix_));
    INFO(install.output);
    REQUIRE(install.status == 0);
  }
  ~InstalledTree() {
    std::error_code ignored;
    fs::remove_all(prefix_, ignored);
  }
  InstalledTree(const InstalledTree&) = delete;
  InstalledTree& operator=(const InstalledTree&) = delete;

  const fs::path& prefix() const { return prefix_; }
  fs::path libdir() const { return prefix_ / DLOCK_INSTALL_LIBDIR; }

 private:
  fs::path prefix_;
};

const std::string kExpectedOutput = "dlock_version=" + std::string(dlock::version()) + " prefix=consumer:";

}  // namespace

TEST_CASE("installed dlock: headers, libraries, the dlock binary, CMake and pkg-config files", "[packaging]") {
  InstalledTree tree;
  for (const char* header : {"dlock/dlock.hpp", "dlock/lock_service.hpp", "dlock/config.hpp", "dlock/version.hpp",
                             "dlock/detail/held_lock.hpp"}) {
    CHECK(fs::exists(tree.prefix() / "include" / header));
  }
  for (const char* file : {"libdlock_core.a", "libdlock_integration.a", "cmake/dlock/dlockConfig.cmake",
                           "cmake/dlock/dlockConfigVersion.cmake", "cmake/dlock/dlockTargets.cmake",
                           "pkgconfig/dlock.pc"}) {
    CHECK(fs::exists(tree.libdir() / file));
  }
  const auto version = shell(quoted(tree.prefix() / "bin" / "dlock") + " --version");
  CHECK(version.status == 0);
  CHECK(version.output == "dlock " + std::string(dlock::version()) + "\n");
}

TEST_CASE("installed dlock is found by find_package(dlock) from another CMake project", "[packaging]") {
  InstalledTree tree;
  const fs::path build = tree.prefix() / "consumer-build";
  const auto configure = shell(std::string("'" CMAKE_COMMAND "' -S '" DLOCK_SOURCE_DIR "/tests/consumer' -B ") +
                               quoted(build) + " -DCMAKE_CXX_COMPILER='" CXX_COMPILER "' -DCMAKE_PREFIX_PATH=" +
                               quoted(tree.prefix()) + " -DCMAKE_CXX_FLAGS='" CONSUMER_FLAGS "'");
  INFO(configure.output);
  REQUIRE(configure.status == 0);
  const auto compile = shell(std::string("'" CMAKE_COMMAND "' --build ") + quoted(build));
  INFO(compile.output);
  REQUIRE(compile.status == 0);
  const auto run = shell(quoted(build / "consumer"));
  CHECK(run.status == 0);
  CHECK_THAT(run.output, Catch::Contains(kExpectedOutput));
  CHECK_THAT(run.output, Catch::Contains("config_error=caught"));
}

TEST_CASE("installed dlock links a program through pkg-config --cflags --libs dlock", "[packaging]") {
  InstalledTree tree;
  const fs::path program = tree.prefix() / "pc-consumer";
  const std::string pkg_config = "PKG_CONFIG_PATH=" + quoted(tree.libdir() / "pkgconfig") + " pkg-config";
  const auto modversion = shell(pkg_config + " --modversion dlock");
  CHECK(modversion.output == std::string(dlock::version()) + "\n");
  const auto compile = shell(std::string("'" CXX_COMPILER "' -std=c++20 " CONSUMER_FLAGS " '" DLOCK_SOURCE_DIR
                                         "/tests/consumer/main.cpp' -o ") +
                             quoted(program) + " $(" + pkg_config + " --cflags --libs dlock)");
  INFO(compile.output);
  REQUIRE(compile.status == 0);
  const auto run = shell(quoted(program));
  CHECK(run.status == 0);
  CHECK_THAT(run.output, Catch::Contains(kExpectedOutput));
}

TEST_CASE("dlock added with add_subdirectory builds a consumer and none of dlock's own tests or tools",
          "[packaging]") {
  InstalledTree scratch;  // only for its temporary directory
  const fs::path build = scratch.prefix() / "subdirectory-build";
  const auto configure =
      shell(std::string("'" CMAKE_COMMAND "' -S '" DLOCK_SOURCE_DIR "/tests/consumer_subdirectory' -B ") +
            quoted(build) + " -DCMAKE_CXX_COMPILER='" CXX_COMPILER "' -DDLOCK_SOURCE_DIR='" DLOCK_SOURCE_DIR
            "' -DCMAKE_CXX_FLAGS='" CONSUMER_FLAGS "'");
  INFO(configure.output);
  REQUIRE(configure.status == 0);
  const auto targets = shell(std::string("'" CMAKE_COMMAND "' --build ") + quoted(build) + " --target help");
  CHECK_THAT(targets.output, Catch::Contains("consumer"));
  for (const char* absent : {"test_config", "flash_sale", "dlock-bench", "dlock_cli"}) {
    CHECK_THAT(targets.output, !Catch::Contains(absent));
  }
  const auto compile = shell(std::string("'" CMAKE_COMMAND "' --build ") + quoted(build) + " --target consumer -j2");
  INFO(compile.output);
  REQUIRE(compile.status == 0);
  const auto run = shell(quoted(build / "consumer"));
  CHECK(run.status == 0);
  CHECK_THAT(run.output, Catch::Contains(kExpectedOutput));
}
