// dlock as an installed package: `cmake --install` into a temporary prefix,
// then tests/consumer, a project outside the tree, builds against it with
// find_package(dlock) and with pkg-config, as a user's service would, and
// runs against a throwaway Redis. A library-only build configures without
// Catch2.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dlock/config.hpp"
#include "dlock/version.hpp"
#include "redis_server.hpp"
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

// The consumer's own config file, for `redis`: its settings, and dlock's in a `dlock:` section.
class ConsumerConfig {
 public:
  explicit ConsumerConfig(const dlock::test::RedisServer& redis) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("dlock-consumer-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".yaml");
    std::ofstream(path_) << "inventory:\n  warehouses: [north, south]\n"
                         << "dlock:\n  redis:\n    port: " << redis.port() << "\n  lock:\n    key_prefix: \"consumer:\"\n"
                         << "  logging:\n    level: warn\n";
  }
  ~ConsumerConfig() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  ConsumerConfig(const ConsumerConfig&) = delete;
  ConsumerConfig& operator=(const ConsumerConfig&) = delete;

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Runs a built consumer against a throwaway Redis and checks what it did there.
void check_consumer_runs(const fs::path& program) {
  dlock::test::RedisServer redis;
  ConsumerConfig config(redis);
  const auto run = shell(quoted(program) + " " + quoted(config.path()));
  INFO(run.output);
  CHECK(run.status == 0);
  CHECK_THAT(run.output, Catch::Contains("scoped_lock held=1 token=yes") && Catch::Contains("after scope held=0"));
  CHECK_THAT(run.output, Catch::Contains(kExpectedOutput));
  CHECK_THAT(run.output, Catch::Contains("config_error=caught"));
  CHECK(redis.run({"EXISTS", "consumer:{stock:42}:fence"}) == "1");
  CHECK(redis.run({"EXISTS", "consumer:{stock:42}"}) == "0");
}

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
  // The documented example config, every setting with its range, as a starting point.
  const fs::path example = tree.prefix() / "share" / "dlock" / "dlock.example.yaml";
  CHECK(fs::exists(example));
  CHECK(dlock::load_config(example).lock.key_prefix == "dlock:");
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
  check_consumer_runs(build / "consumer");
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
  check_consumer_runs(program);
}

TEST_CASE("dlock added with add_subdirectory builds a consumer and none of dlock's own tests or tools",
          "[packaging]") {
  InstalledTree scratch;  // only for its temporary directory
  const fs::path build = scratch.prefix() / "subdirectory-build";
  const auto configure =
      shell(std::string("'" CMAKE_COMMAND "' -S '" DLOCK_SOURCE_DIR "/tests/consumer_subdirectory' -B ") +
            quoted(build) + " -DCMAKE_CXX_COMPILER='" CXX_COMPILER "' -DDLOCK_SOURCE_DIR='" DLOCK_SOURCE_DIR
            "' -DCMAKE_CXX_FLAGS='" CONSUMER_FLAGS "'"
            // As a unity build: a third of the time to build (the plain tree compiles each file alone).
            " -DDLOCK_UNITY_BUILD=ON");
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
  check_consumer_runs(build / "consumer");
}

TEST_CASE("a library-only build needs neither Catch2 nor the examples, and says so in its targets", "[packaging]") {
  InstalledTree scratch;  // only for its temporary directory
  const fs::path build = scratch.prefix() / "library-only-build";
  // Catch2 made unfindable: a configure that looked for it would fail.
  const auto configure =
      shell(std::string("'" CMAKE_COMMAND "' -S '" DLOCK_SOURCE_DIR "' -B ") + quoted(build) +
            " -DCMAKE_CXX_COMPILER='" CXX_COMPILER "' -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON"
            " -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=OFF");
  INFO(configure.output);
  REQUIRE(configure.status == 0);
  const auto targets = shell(std::string("'" CMAKE_COMMAND "' --build ") + quoted(build) + " --target help");
  for (const char* present : {"dlock_core", "dlock_integration", "dlock_cli", "install"}) {
    CHECK_THAT(targets.output, Catch::Contains(present));
  }
  for (const char* absent : {"test_config", "flash_sale", "dlock-bench", "dlock_test_support"}) {
    CHECK_THAT(targets.output, !Catch::Contains(absent));
  }
}
