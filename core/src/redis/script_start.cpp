// Scripts sent without waiting for their replies: a release whose reply is
// read later, and the next call on the same lock sent after it on its
// connection, so Redis runs the two in order without a round trip between.
#include "dlock/scripts.hpp"

#include <optional>
#include <utility>

#include "dlock/errors.hpp"
#include "redis/evalsha_parts.hpp"

namespace dlock::detail {
namespace {

// `before`'s reply, or none when the connection failed first.
std::optional<RedisReply> reply_or_none(PendingReply& before) {
  try {
    return before.get();
  } catch (const ConnectionError&) {
    return std::nullopt;
  }
}

}  // namespace

std::unique_ptr<PendingReply> ScriptRunner::start(const Script& script, std::span<const std::string_view> keys,
                                                  std::span<const std::string_view> args) {
  // A Redlock's call is a majority's, and an acknowledged one needs its WAIT's reply: both are read at once.
  if (quorum() || acknowledges()) return nullptr;
  EvalshaParts parts(sha_of(script), keys, args);
  return redis_.start(parts.span());
}

RedisReply ScriptRunner::run_after(PendingReply& before, const BeforeReply& on_before, const Script& script,
                                   std::span<const std::string_view> keys, std::span<const std::string_view> args) {
  std::unique_ptr<PendingReply> next;
  try {
    EvalshaParts parts(sha_of(script), keys, args);
    next = before.then_keeping(parts.span());
  } catch (...) {
    // Nothing of this call was sent (the script could not be loaded, the send failed): `before` is still owed.
    on_before(reply_or_none(before));
    throw;
  }
  if (!next) {
    // The connection carries no more (or `before`'s reply was taken already): read it, then run this anywhere.
    on_before(reply_or_none(before));
    return run(script, keys, args);
  }
  RedisReply reply;
  std::optional<RedisReply> earlier;
  try {
    reply = next->get();
    earlier = next->earlier();
  } catch (...) {
    earlier = next->earlier();
    next.reset();
    on_before(std::move(earlier));
    throw;
  }
  // The connection back in the pool first: what on_before does (a reload, a rerun) borrows one.
  next.reset();
  on_before(std::move(earlier));
  if (is_noscript(reply)) reply = run(script, keys, args);
  return reply;
}

}  // namespace dlock::detail
