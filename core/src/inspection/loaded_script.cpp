// LoadedScript: a dlock command's Lua script loaded with SCRIPT LOAD and run with EVALSHA,
// LoadedScript: an inspection script loaded with SCRIPT LOAD and run with EVALSHA,
#include "dlock/detail/loaded_script.hpp"

#include "dlock/detail/redis_refusal.hpp"

namespace dlock::detail {

LoadedScript::LoadedScript(RedisExecutor& redis, const std::string& source, const std::string& purpose)
    : redis_(redis), source_(source), purpose_(purpose) {
  load();
}

void LoadedScript::load() {
  const RedisReply reply = redis_.command({"SCRIPT", "LOAD", source_});
  if (reply.is_error()) throw_refusal(redis_.endpoint(), "cannot load the script to " + purpose_, reply.str);
  sha_ = reply.str;
}

RedisReply LoadedScript::run(const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  RedisCommand command = {"EVALSHA", sha_, std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  RedisReply reply = redis_.command(command);
  if (reply.is_error() && reply.str.starts_with("NOSCRIPT")) {
    load();
    command[1] = sha_;
    reply = redis_.command(command);
  }
  return reply;
}

}  // namespace dlock::detail
