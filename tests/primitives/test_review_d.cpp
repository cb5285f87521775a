// Review D: the scripts as .lua files (f2acdea: cmake/embed_lua.cmake) and
// "one set of rules" (7ff5ada: a read inside a write by its exact id, a write
// adopted with a new token, a release retried into nothing, one timeout
// report for every primitive and lock_all), attacked. Each case reproduces a
// defect, failing on the code it was written against. Tag [review].
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

auto quiet = [](dlock::Config& c) { c.logging.level = "off"; };

// A scratch directory with fixture scripts, assembled by the build's own tool
// (cmake -P cmake/embed_lua.cmake, as core/CMakeLists.txt runs it).
class EmbedFixture {
 public:
  EmbedFixture() {
    char dir[] = "/tmp/dlock_review_d_XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    dir_ = dir;
  }
  ~EmbedFixture() { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  // Runs the tool on `scripts` ("a.lua|b.lua"); returns its exit status.
  int embed(const std::string& scripts) const {
    // Appended piece by piece: GCC 12 at -O2 reports a false -Warray-bounds on one long chain of operator+.
    std::string command = "'";
    command.append(DLOCK_TEST_CMAKE).append("' -DSOURCE_DIR='").append(dir_).append("' -DHEADER='").append(dir_);
    command.append("/out/x.hpp' -DOUT_DIR='").append(dir_).append("/out' -DNAMESPACE=x '-DSCRIPTS=").append(scripts);
    command.append("' -P '").append(DLOCK_TEST_SOURCE_DIR).append("/cmake/embed_lua.cmake' >/dev/null 2>&1");
    return std::system(command.c_str());
  }
  // The assembled script, as Redis would be sent it.
  std::string assembled(const std::string& name) const {
    std::ifstream in(dir_ + "/out/" + name + ".lua", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string dir_;
};

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

// --- Defect 1 (7ff5ada) ------------------------------------------------------
// Schedule: a thread takes the write lock, re-enters it, and detaches the
// inner hold only (a "partial detach"); its outer guard is still true, not
// lost, renewed by the watchdog. It then asks for a read lock inside the
// write it holds.
// Expected (docs/primitives.md, read_lock row: "the writer's thread may take read locks
// inside its write lock"; and "one set of rules": the same thread may still
// re-enter that write, as it may re-enter a plain lock after a partial detach,
// so the hold is still its own): the read is granted at once.
// Actual: live_write_id() names no write once `detached` is set on the
// HeldLock, which a partial detach sets while the thread still holds it; the
// script then holds the thread's own live write against its read: try_read_lock
// is refused, and read_lock waits out its whole wait behind the caller's own
// write (a self-deadlock until the wait ends). Before 7ff5ada it was granted.
TEST_CASE("review D: a read inside a write the thread still holds after a partial detach is granted",
          "[review][read_write][detach]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, quiet);

  // The plain lock, for comparison: after a partial detach the thread still re-enters its lock.
  auto lock_outer = service->lock("plain", {.lease = 20s});
  service->lock("plain", {.lease = 20s}).detach();
  CHECK(service->try_lock("plain"));

  auto outer = service->write_lock("report", {.lease = 20s});
  service->write_lock("report", {.lease = 20s}).detach();  // the inner hold only
  REQUIRE(outer);
  REQUIRE_FALSE(outer.lost());
  auto again = service->try_write_lock("report");  // the write is still this thread's to re-enter
  CHECK(again);
  auto read = service->try_read_lock("report");
  CHECK(read);  // fails: refused, a read inside the caller's own live write
  CHECK_NOTHROW(service->read_lock("report", {.wait = 300ms}));  // fails: LockTimeoutError after 300 ms
}

// --- Defect 2 (7ff5ada) ------------------------------------------------------
// Schedule: lock_all({"a", "b"}, wait 300 ms); "b" is held by another owner;
// Redis sleeps (DEBUG SLEEP 1) while "a" is asked for, so "a" is granted only
// after the set's wait ran out, and "b" is then tried with 0 ms left.
// Expected: the LockTimeoutError says the set's wait ran out (lock_all's own
// report before 7ff5ada: "still busy when the set's wait of 300 ms ran out"),
// as a wait that ran out does for lock().
// Actual: lock_all now passes on the key's own report, made for a key asked
// with no wait at all: "busy; tried once, without waiting: ...; to wait for it,
// pass a wait (LockOptions::wait, or lock.wait_ms in the config)" — advice
// that is wrong for a caller who passed a wait. (The stats count the call as
// `busy`, "calls without a wait", not `timeouts`; that was so before too.)
TEST_CASE("review D: lock_all whose wait ran out on an earlier key does not say it was tried without waiting",
          "[review][multi_lock]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 5s;  // the grant of "a" arrives, late, rather than a ConnectionError
    c.logging.level = "off";
  });
  auto other = dlock::test::make_service(redis, quiet);
  service->lock("a").unlock();  // scripts loaded
  auto b = other->lock("b", {.lease = 20s});
  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  std::string message;
  try {
    service->lock_all({"a", "b"}, {.wait = 300ms});
  } catch (const dlock::LockTimeoutError& e) {
    message = e.what();
  }
  sleeper.join();
  REQUIRE_FALSE(message.empty());
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{a}"}));  // holds none: held up
  CHECK_THAT(message, !Catch::Contains("without waiting"));  // fails: "busy; tried once, without waiting"
  CHECK_THAT(message, !Catch::Contains("pass a wait"));      // fails: "to wait for it, pass a wait"
}

// --- Defect 3 (f2acdea) ------------------------------------------------------
// embed_lua.cmake promises (its header): "A line `--@include path` ... is
// replaced by that file's text, once per script". Schedule: a script names
// the same include twice. Expected: pasted once (the second is a no-op, as for
// an include reached twice through nesting). Actual: string(REPLACE) replaces
// every occurrence of the directive in one go, so the helper is pasted twice
// (the `seen` list is consulted only for the first match).
TEST_CASE("review D: embed_lua pastes an include named twice in one script once", "[review][embed_lua]") {
  EmbedFixture fixture;
  fixture.write("helper.lua", "local function helper() return 1 end\n");
  fixture.write("twice.lua", "-- a script\n--@include helper\nlocal x = helper()\n--@include helper\nreturn x\n");
  REQUIRE(fixture.embed("twice.lua") == 0);
  const std::string text = fixture.assembled("twice");
  CHECK(count_of(text, "local function helper()") == 1);  // fails: 2
}

// --- Defect 4 (f2acdea) ------------------------------------------------------
// Only a line that is the directive is to be replaced (the header: "A line
// `--@include path`"). Schedule: a comment that mentions the directive after
// other text ("-- the helpers come from --@include helper"), beside the real
// directive. Expected: the comment is left as written; the helper pasted once,
// where the directive line is. Actual: string(REPLACE) matches the text
// anywhere, so the helper's text is pasted into the comment too: its first
// line becomes part of the comment and the rest becomes code (with a helper of
// more than one line whose first line is code, a script Redis refuses to load;
// here, at least, a second copy).
TEST_CASE("review D: embed_lua leaves a comment that mentions --@include as written", "[review][embed_lua]") {
  EmbedFixture fixture;
  fixture.write("helper.lua", "local function helper()\n  return 1\nend\n");
  fixture.write("mention.lua",
                "-- the helpers come from --@include helper\n--@include helper\nreturn helper()\n");
  REQUIRE(fixture.embed("mention.lua") == 0);
  const std::string text = fixture.assembled("mention");
  CHECK(text.find("-- the helpers come from --@include helper\n") != std::string::npos);  // fails: pasted into it
  CHECK(count_of(text, "return 1\nend") == 1);                                               // fails: 2
}
