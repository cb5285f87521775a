// A user key's Redis names for the CLI: P{K}, P{K}:fence and P{K}:released.
#include "lock_names.hpp"

namespace dlock::cli {

LockNames lock_names(const LockConfig& config, std::string_view key) {
  LockNames names;
  names.lock.append(config.key_prefix).append("{").append(key).append("}");
  names.fence = names.lock + ":fence";
  names.channel = names.lock + ":released";
  return names;
}

}  // namespace dlock::cli
