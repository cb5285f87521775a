#pragma once
// Turns OpenSSL's view of a failure (SSL_get_error, the verification
// result, the thread's error queue) into a TransportError whose kind says
// which of the TLS mistakes a user can make this was.

#include <openssl/ssl.h>

#include "connection/transport.hpp"

namespace dlock::detail {

// After SSL_connect failed with `ssl_error` (SSL_get_error's answer).
TransportError handshake_failure(SSL* ssl, int ssl_error);

// After SSL_read or SSL_write failed on an established connection. The
// server refusing a client certificate shows up here too: with TLS 1.3 it
// checks the certificate after the client's handshake has already succeeded.
TransportError transfer_failure(int ssl_error);

// A lost-connection error for errno `error` (0: the peer closed).
TransportError socket_failure(int error);

}  // namespace dlock::detail
