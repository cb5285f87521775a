// The words of a ConnectionError for each kind of transport failure (refused, timed out,
// lost, garbled, every TLS refusal), each naming the setting to check.
#include "connection/connection_failure.hpp"

namespace dlock::detail {
namespace {

using Kind = TransportError::Kind;

constexpr const char* kTlsExpected =
    "; the server may expect TLS: set redis.tls.enabled: true or use rediss://";

std::string timed_out(const RedisConfig& config, const std::string& during) {
  const bool connecting = during == "connecting";
  const auto limit = connecting ? config.connect_timeout : config.command_timeout;
  return during + " timed out after " + std::to_string(limit.count()) +
         " ms; check that redis-server is running and reachable at redis.host:redis.port, or raise redis." +
         (connecting ? "connect_timeout_ms" : "command_timeout_ms") + " if it is only slow";
}

std::string handshake_unanswered(const RedisConfig& config, const std::string& cause) {
  return "the server did not answer the TLS handshake (" + cause +
         "); is TLS enabled on that port? set redis.tls.enabled: false (and use redis://, not rediss://) if it "
         "speaks plaintext, or raise redis.connect_timeout_ms (" +
         std::to_string(config.connect_timeout.count()) + " ms) if it is only slow";
}

std::string ca_in_use(const TlsConfig& tls) {
  return tls.ca_file.empty() ? "not set, so the system's CA store was used" : "now '" + tls.ca_file + "'";
}

std::string client_refused(const TlsConfig& tls, const std::string& cause) {
  if (tls.cert_file.empty()) {
    return "the server demands a client certificate (" + cause +
           "); set redis.tls.cert_file and redis.tls.key_file to one signed by a CA in its tls-ca-cert-file";
  }
  return "the server refused the client certificate '" + tls.cert_file + "' (" + cause +
         "); check that redis.tls.cert_file is signed by a CA in the server's tls-ca-cert-file and still valid";
}

std::string describe_cause(const RedisConfig& config, const std::string& during, const TransportError& error,
                           bool answered) {
  const std::string cause = error.what();
  const TlsConfig& tls = config.tls;
  const std::string hint = !answered && !tls.enabled ? kTlsExpected : "";
  switch (error.kind()) {
    case Kind::timed_out:
      if (during == kDuringHandshake) return handshake_unanswered(config, "no answer within the connect timeout");
      return timed_out(config, during);
    case Kind::refused:
      return "connection refused; check redis.host and redis.port and that redis-server is running";
    case Kind::lost:
      // With TLS 1.3 the server checks a client certificate after the client's
      // handshake is done; its alert is lost when the close resets the connection.
      if (tls.enabled && !answered) {
        return "the server closed the TLS connection before its first answer (" + cause +
               "); it may have refused the client certificate: " +
               (tls.cert_file.empty() ? std::string("if it demands one, set redis.tls.cert_file and redis.tls.key_file")
                                      : "check that redis.tls.cert_file '" + tls.cert_file +
                                            "' is signed by a CA in the server's tls-ca-cert-file");
      }
      return "connection lost while " + during + " (" + cause + "); check that redis-server is running" +
             (hint.empty() ? "; the next call reconnects" : hint);
    case Kind::garbled:
      return "the server's answer to " + during + " is not Redis' protocol (" + cause + ")" +
             (hint.empty() ? "; check that redis.host:redis.port is a redis-server" : hint);
    case Kind::tls_handshake:
      return handshake_unanswered(config, cause);
    case Kind::tls_untrusted:
      return "the server's TLS certificate is not trusted (" + cause + "); set redis.tls.ca_file to the CA that "
             "signed it (" + ca_in_use(tls) + ")";
    case Kind::tls_expired:
      return "the server's TLS certificate is out of its validity period (" + cause +
             "); renew the server's tls-cert-file, and check this host's clock";
    case Kind::tls_name_mismatch:
      return "the server's TLS certificate does not name '" +
             (tls.server_name.empty() ? config.host : tls.server_name) + "' (" + cause +
             "); set redis.tls.server_name to a name the certificate holds, or dial the server by that name";
    case Kind::tls_unverified:
      return "the server's TLS certificate failed verification (" + cause + "); check redis.tls.ca_file (" +
             ca_in_use(tls) + ") and the server's tls-cert-file";
    case Kind::tls_client_refused:
      return client_refused(tls, cause);
    case Kind::tls_failed:
      return "TLS failed while " + during + " (" + cause + "); the next call reconnects";
    case Kind::failed:
      break;
  }
  return during + " failed (" + cause + "); check redis.host and redis.port and that redis-server is running";
}

}  // namespace

std::string describe_failure(const std::string& endpoint, const RedisConfig& config, const std::string& during,
                             const TransportError& error, bool answered) {
  return "redis " + endpoint + ": " + describe_cause(config, during, error, answered);
}

std::string describe_auth_refusal(const std::string& endpoint, const std::string& answer) {
  return "redis " + endpoint + ": authentication failed (" + answer +
         "); check redis.password, and redis.username for an ACL user (or the user:password of redis.url, or "
         "DLOCK_REDIS_PASSWORD)";
}

bool is_auth_refusal(std::string_view answer) {
  return answer.starts_with("NOAUTH") || answer.starts_with("WRONGPASS") ||
         answer.find("invalid password") != std::string_view::npos ||
         answer.find("invalid username-password pair") != std::string_view::npos;
}

}  // namespace dlock::detail
