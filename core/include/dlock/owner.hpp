#pragma once
// Owner: who a hold belongs to for re-entry. The same owner locking a key it
// holds re-enters (a counted hold; only the outermost release frees the
// lock); a different owner waits. The blocking calls default to the calling
// thread's owner, which is what threaded code expects and what coroutine code
// must not use: coroutines share threads, so two tasks on one thread would
// "re-enter" each other's locks. A task, request or coroutine makes its own
// with Owner::create() and passes it in LockOptions::owner.
//
// Cheap to copy (one integer), comparable, printable: its 16 hex digits are
// the middle part of its acquisitions' ids ("<instance>:<owner>:<n>"), which
// `dlock status` and `dlock list` show.

#include <cstdint>
#include <iosfwd>
#include <string>

namespace dlock {

namespace detail {
struct OwnerAccess;
}

class Owner {
 public:
  // A new owner, drawn from the OS random source: unique within the process
  // (and unguessable: an owner's id lets no other client release its locks).
  // Throws dlock::Error if the OS refuses to draw.
  static Owner create();
  // The calling thread's owner: the one the blocking calls use when
  // LockOptions::owner is unset. The same for the thread's whole life.
  static Owner current_thread();

  // 16 lower-case hex digits.
  std::string str() const;
  std::uint64_t value() const { return value_; }

  friend bool operator==(Owner, Owner) = default;

 private:
  friend struct detail::OwnerAccess;
  explicit Owner(std::uint64_t value) : value_(value) {}
  std::uint64_t value_;
};

std::ostream& operator<<(std::ostream& out, Owner owner);

}  // namespace dlock
