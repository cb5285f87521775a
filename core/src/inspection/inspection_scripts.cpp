// The inspection's scripts, as Script values over core/scripts/inspection/*.lua (embedded at build time).
#include "dlock/detail/inspection_scripts.hpp"

#include "lua/core_scripts.hpp"

namespace dlock::detail {

const Script kLockStatusScript{"lock_status", std::string(lua::status)};
const Script kSharedStatusScript{"shared_status", std::string(lua::shared_status)};
const Script kForceReleaseRecordsScript{"force_release_records", std::string(lua::force_release_records)};

}  // namespace dlock::detail
