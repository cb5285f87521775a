// The lock's scripts, as Script values over the text core/scripts/lock/*.lua
// holds (embedded at build time by cmake/embed_lua.cmake).
#include "dlock/scripts.hpp"

#include "lua/core_scripts.hpp"

namespace dlock::detail {

const Script kAcquireScript{"acquire", std::string(lua::acquire)};
const Script kReleaseScript{"release", std::string(lua::release)};
const Script kLeaveScript{"leave", std::string(lua::leave)};
const Script kKeepInLineScript{"keep_in_line", std::string(lua::keep_in_line)};
const Script kRenewScript{"renew", std::string(lua::renew)};
const Script kRenewManyScript{"renew_many", std::string(lua::renew_many)};
const Script kRaiseFenceScript{"raise_fence", std::string(lua::raise_fence)};
const Script kForceReleaseScript{"force_release", std::string(lua::force_release)};

}  // namespace dlock::detail
