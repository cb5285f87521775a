// The forced release of a read-write lock's or a semaphore's holders: the record script run on
// the part's names (the same hash tag as the lock's) and its reply read into removed holders.
#include "dlock/detail/shared_unlock.hpp"

#include "dlock/detail/loaded_script.hpp"
#include "dlock/detail/inspection_scripts.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/detail/reply_integer.hpp"

namespace dlock::detail {

std::vector<RemovedHolder> force_release_holders(RedisExecutor& redis, const LockConfig& config,
                                                 std::string_view key, SharedPart part, std::string_view owner) {
  const bool read_write = part == SharedPart::read_write;
  const std::string base = config.key_prefix + "{" + std::string(key) + "}" + (read_write ? ":rw" : ":semaphore");
  std::vector<std::string> keys{base + (read_write ? ":readers" : ":holders"), base + ":queue"};
  if (read_write) keys.push_back(base + ":write");
  LoadedScript script(redis, kForceReleaseRecordsScript.source, "force an unlock");
  const RedisReply reply = script.run(keys, {std::string(owner), base + ":released"});
  if (reply.is_error() || reply.type != RedisReply::Type::Array) {
    throw_refusal(refusal_of(redis.endpoint(), "forced unlock of " + base + " failed", reply));
  }
  std::vector<RemovedHolder> removed;
  for (std::size_t i = 0; i + 2 < reply.elements.size(); i += 3) {
    removed.push_back({reply.elements[i].str, integer_of(reply.elements[i + 1]).value_or(0),
                       reply.elements[i + 2].str == "writer"});
  }
  return removed;
}

}  // namespace dlock::detail
