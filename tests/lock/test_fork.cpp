// fork() after a service (or its executor) exists: parent and child must not
// share a socket, or each reads the other's replies.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "dlock/errors.hpp"
#include "dlock/hiredis_executor.hpp"
#include "redis_server.hpp"

namespace {

constexpr int kRounds = 3000;

// GETs `key` kRounds times; how many replies were not `expected` (a
// ConnectionError, e.g. a reply torn between two readers, counts as all of them).
int wrong_replies(dlock::HiredisExecutor& executor, const std::string& key, const std::string& expected) {
  int wrong = 0;
  try {
    for (int i = 0; i < kRounds; ++i) {
      if (executor.command({"GET", key}).str != expected) ++wrong;
    }
  } catch (const dlock::Error&) {
    return kRounds;
  }
  return wrong;
}

}  // namespace

TEST_CASE("a forked child and its parent each get only their own replies through one executor", "[fork]") {
  dlock::test::RedisServer redis;
  dlock::HiredisExecutor executor(redis.config().redis);
  executor.connect();  // the pool now holds an idle connection the child inherits
  REQUIRE(executor.command({"SET", "who:parent", "parent"}).str == "OK");
  REQUIRE(executor.command({"SET", "who:child", "child"}).str == "OK");

  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char start = 0;
    if (::read(go[0], &start, 1) != 1) ::_exit(3);
    const int wrong = wrong_replies(executor, "who:child", "child");
    bool subscribe_refused = false;
    try {
      executor.subscribe("dlock:{fork}:released", [](const std::string&) {});
    } catch (const dlock::ConnectionError& e) {
      subscribe_refused = std::string(e.what()).find("fork()") != std::string::npos;
    }
    // _exit: the parent's threads and sockets are not this process's to clean up.
    ::_exit(wrong != 0 ? 1 : subscribe_refused ? 0 : 2);
  }
  REQUIRE(::write(go[1], "g", 1) == 1);  // both start together, so their commands interleave
  const int wrong = wrong_replies(executor, "who:parent", "parent");
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(go[0]);
  ::close(go[1]);

  CHECK(wrong == 0);
  INFO("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
                            << " (1: wrong replies, 2: subscribe was not refused)");
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // The parent's connection is still in step after the child went.
  CHECK(executor.command({"GET", "who:parent"}).str == "parent");
}
