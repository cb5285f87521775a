#pragma once
// The OpenSSL client context of a TLS config: trusted CAs, the client
// certificate and key, whether to verify. Loading a CA bundle costs
// milliseconds, so each distinct config is built once and shared by every
// connection made with it; it is built again when one of its files changes
// (a rotated certificate is picked up by the next new connection).

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "dlock/config.hpp"

namespace dlock::detail {

// Throws ConnectionError ("redis ENDPOINT: redis.tls.ca_file: ...") naming
// the setting and the file that cannot be read or holds no valid PEM.
std::shared_ptr<SSL_CTX> tls_context(const TlsConfig& tls, const std::string& endpoint);

}  // namespace dlock::detail
