#pragma once
// Opens the TCP connection under every Redis connection: a non-blocking
// connect bounded by a deadline (redis.connect_timeout_ms), then
// TCP_NODELAY (commands are small and answered one by one) and TCP keepalive
// (a peer that vanished without a FIN or RST is found even on an idle socket).

#include <string>

#include "connection/transport.hpp"

namespace dlock::detail {

// Returns the connected socket, blocking (Transport bounds its waits) and close-on-exec. Tries each
// address the host resolves to. Throws TransportError (refused, timed_out, failed).
int dial(const std::string& host, int port, Deadline deadline);

}  // namespace dlock::detail
