#pragma once
// One raw hiredis connection for the reference clients: commands go out as
// argv arrays the caller keeps on its stack, scripts are loaded once with
// SCRIPT LOAD and called by EVALSHA. No pool, no retry, no reconnect: a
// reference client measures what Redis and the wire cost, nothing else.

#include <hiredis/hiredis.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace bench {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RawConnection {
 public:
  // Throws std::runtime_error if redis at host:port cannot be reached.
  RawConnection(const std::string& host, int port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Sends one command and waits for its reply. Throws std::runtime_error if
  // the connection is lost or Redis answers with an error.
  Reply call(int argc, const char** argv, const std::size_t* lens);
  // SCRIPT LOAD: returns the script's SHA1 for EVALSHA.
  std::string load(std::string_view source);

 private:
  redisContext* context_;
  std::string address_;  // for error messages
};

}  // namespace bench
