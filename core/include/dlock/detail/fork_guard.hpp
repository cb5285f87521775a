#pragma once
// What a service needs to survive fork(): a count of the forks
// this process descends from, and mutexes held across fork() so a child never
// inherits one that another thread of its parent had locked (that child
// would block on it forever).
//
// A socket opened before a fork is shared by parent and child: both would
// write commands on it and read each other's replies. Pooled connections
// therefore remember the generation they were made in, and one made in an
// earlier generation is closed without a word sent on it. A lock service
// compares it too, and refuses to act in a child, which would otherwise share
// its parent's owner identity and could take its parent's locks as its own.

#include <mutex>

namespace dlock::detail {

// Increases by one in the child of every fork() (a pthread_atfork handler);
// cheap enough to compare on every borrow. posix_spawn and vfork children,
// which exec at once, do not count.
unsigned fork_generation();

// Registers `mutex` to be locked just before fork() and unlocked in parent
// and child just after. Unregister before the mutex is destroyed.
void hold_across_fork(std::mutex& mutex);
void release_across_fork(std::mutex& mutex);

}  // namespace dlock::detail
