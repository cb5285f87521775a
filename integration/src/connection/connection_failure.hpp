#pragma once
// The words of a ConnectionError: what went wrong on the way to a Redis
// server and which setting to look at. Every message starts
// "redis host:port: " and never quotes the password.

#include <string>
#include <string_view>

#include "dlock/config.hpp"
#include "connection/transport.hpp"

namespace dlock::detail {

// What the connection was doing when the transport failed; the TLS
// handshake's timeout reads as a handshake failure, not a slow server.
inline constexpr const char* kDuringHandshake = "the TLS handshake";

// `answered`: whether the server ever sent a reply on this connection. A
// plaintext connection dropped or answered with garbage before that is
// likely talking to a TLS port, and the message says so.
std::string describe_failure(const std::string& endpoint, const RedisConfig& config, const std::string& during,
                             const TransportError& error, bool answered);

std::string describe_auth_refusal(const std::string& endpoint, const std::string& answer);

// Whether a server's error answer is a refused login (NOAUTH, WRONGPASS, an
// older server's "invalid password").
bool is_auth_refusal(std::string_view answer);

}  // namespace dlock::detail
