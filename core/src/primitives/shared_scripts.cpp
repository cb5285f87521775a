// The read-write lock's and the semaphore's scripts, as Script values over the
// text core/scripts/primitives/*.lua holds (embedded at build time).
#include "dlock/detail/shared_scripts.hpp"

#include "lua/core_scripts.hpp"

namespace dlock::detail {

const Script& semaphore_acquire_script() {
  static const Script script{"semaphore_acquire", std::string(lua::semaphore_acquire)};
  return script;
}

const Script& read_write_acquire_script() {
  static const Script script{"read_write_acquire", std::string(lua::read_write_acquire)};
  return script;
}

const Script& record_release_script() {
  static const Script script{"record_release", std::string(lua::record_release)};
  return script;
}

const Script& leave_shared_line_script() {
  static const Script script{"leave_shared_line", std::string(lua::leave_shared_line)};
  return script;
}

const Script& set_permits_script() {
  static const Script script{"set_permits", std::string(lua::set_permits)};
  return script;
}

const Script& permits_in_use_script() {
  static const Script script{"permits_in_use", std::string(lua::permits_in_use)};
  return script;
}

}  // namespace dlock::detail
