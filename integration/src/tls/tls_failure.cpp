// OpenSSL's failures sorted into TransportError kinds: untrusted, expired, wrong name, client
// certificate refused, handshake failed, connection lost.
#include "tls/tls_failure.hpp"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace dlock::detail {
namespace {

using Kind = TransportError::Kind;

// The queue's most recent error in words ("wrong version number"); empties the queue.
std::string queued_reason() {
  const unsigned long error = ERR_peek_last_error();
  ERR_clear_error();
  if (error == 0) return "no detail from OpenSSL";
  const char* reason = ERR_reason_error_string(error);
  return reason != nullptr ? reason : "OpenSSL error " + std::to_string(error);
}

// The alerts a server sends when it does not accept the client's certificate
// (or wanted one and got none).
bool refuses_client_certificate(int reason) {
  switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
      return true;
    default:
      return false;
  }
}

Kind verification_kind(long result) {
  switch (result) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return Kind::tls_expired;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return Kind::tls_name_mismatch;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_CERT_UNTRUSTED:
      return Kind::tls_untrusted;
    default:
      return Kind::tls_unverified;
  }
}

// An SSL_ERROR_SSL from the queue: the server refused our certificate, the
// peer hung up (as `closed`), or else `other` with OpenSSL's reason.
TransportError queued_failure(const TransportError& closed, Kind other) {
  const int reason = ERR_GET_REASON(ERR_peek_last_error());
  if (refuses_client_certificate(reason)) return TransportError(Kind::tls_client_refused, queued_reason());
  if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    return closed;
  }
  return TransportError(other, queued_reason());
}

}  // namespace

TransportError socket_failure(int error) {
  if (error == 0) return TransportError(Kind::lost, "Server closed the connection");
  const std::string cause = std::strerror(error);
  if (error == ECONNRESET || error == EPIPE) return TransportError(Kind::lost, cause);
  return TransportError(Kind::failed, cause);
}

TransportError handshake_failure(SSL* ssl, int ssl_error) {
  if (const long result = SSL_get_verify_result(ssl); result != X509_V_OK) {
    ERR_clear_error();
    return TransportError(verification_kind(result), X509_verify_cert_error_string(result));
  }
  const TransportError closed(Kind::tls_handshake, "the server closed the connection during the handshake");
  if (ssl_error == SSL_ERROR_SSL) return queued_failure(closed, Kind::tls_handshake);
  const int error = errno;
  ERR_clear_error();
  if (ssl_error == SSL_ERROR_SYSCALL && error != 0 && error != ECONNRESET) {
    return TransportError(Kind::tls_handshake, std::strerror(error));
  }
  return closed;
}

TransportError transfer_failure(int ssl_error) {
  if (ssl_error == SSL_ERROR_ZERO_RETURN) return socket_failure(0);
  if (ssl_error == SSL_ERROR_SSL) return queued_failure(socket_failure(0), Kind::tls_failed);
  const int error = errno;
  ERR_clear_error();
  return socket_failure(ssl_error == SSL_ERROR_SYSCALL ? error : 0);
}

}  // namespace dlock::detail
