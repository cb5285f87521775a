// Each TLS mistake fails make_lock_service with a ConnectionError that says
// which mistake it is and which setting to change.
#include <catch2/catch.hpp>
#include <fstream>

#include "services.hpp"

using Catch::Contains;
using dlock::test::RedisServer;
using dlock::test::ServerTls;
using dlock::test::test_certificates;

namespace {

std::string failure_of(dlock::Config config) {
  config.redis.password = "pw-never-shown";
  try {
    dlock::make_lock_service(config);
  } catch (const dlock::ConnectionError& error) {
    const std::string message = error.what();
    CHECK(message.starts_with("redis 127.0.0.1:" + std::to_string(config.redis.port) + ": "));
    CHECK(message.find("pw-never-shown") == std::string::npos);
    return message;
  }
  FAIL("make_lock_service did not throw ConnectionError");
  return "";
}

std::string cert(const char* name) { return (test_certificates() / name).string(); }

}  // namespace

TEST_CASE("a certificate from an unknown CA is refused naming redis.tls.ca_file", "[tls]") {
  RedisServer redis({}, ServerTls{});
  dlock::Config config = redis.config();
  config.redis.tls.ca_file = cert("client-ca.pem");
  const std::string message = failure_of(config);
  CHECK_THAT(message, Contains("not trusted"));
  CHECK_THAT(message, Contains("redis.tls.ca_file"));
}

TEST_CASE("an expired server certificate is refused as expired", "[tls]") {
  RedisServer redis({}, ServerTls{.certificate = "expired"});
  CHECK_THAT(failure_of(redis.config()), Contains("certificate has expired"));
}

TEST_CASE("a certificate for another name is refused naming the name and redis.tls.server_name", "[tls]") {
  RedisServer redis({}, ServerTls{.certificate = "wrong-name"});
  const std::string message = failure_of(redis.config());
  CHECK_THAT(message, Contains("does not name '127.0.0.1'"));
  CHECK_THAT(message, Contains("redis.tls.server_name"));
}

TEST_CASE("TLS spoken to a plaintext port says to turn TLS off", "[tls]") {
  RedisServer plain;
  dlock::Config config = plain.config();
  config.redis.tls.enabled = true;
  config.redis.tls.ca_file = cert("ca.pem");
  const std::string message = failure_of(config);
  CHECK_THAT(message, Contains("the server did not answer the TLS handshake"));
  CHECK_THAT(message, Contains("set redis.tls.enabled: false"));
}

TEST_CASE("plaintext spoken to a TLS port says the server may expect TLS", "[tls]") {
  RedisServer redis({}, ServerTls{});
  dlock::Config config = redis.config();
  config.redis.tls = {};
  CHECK_THAT(failure_of(config), Contains("the server may expect TLS: set redis.tls.enabled: true or use rediss://"));
}

TEST_CASE("unreadable or invalid TLS files are named with their setting", "[tls]") {
  RedisServer redis({}, ServerTls{});
  dlock::Config config = redis.config();
  SECTION("a missing CA file") {
    config.redis.tls.ca_file = "/nonexistent/ca.pem";
    const std::string message = failure_of(config);
    CHECK_THAT(message, Contains("redis.tls.ca_file"));
    CHECK_THAT(message, Contains("/nonexistent/ca.pem"));
  }
  SECTION("a CA file that is not PEM") {
    const auto junk = std::filesystem::temp_directory_path() / ("dlock-junk-" + std::to_string(::getpid()) + ".pem");
    std::ofstream(junk) << "not a certificate\n";
    config.redis.tls.ca_file = junk.string();
    CHECK_THAT(failure_of(config), Contains("redis.tls.ca_file: '" + junk.string() + "' holds no valid PEM"));
    std::filesystem::remove(junk);
  }
  SECTION("a key that is not the certificate's") {
    config.redis.tls.cert_file = cert("client.pem");
    config.redis.tls.key_file = cert("server.key");
    CHECK_THAT(failure_of(config), Contains("redis.tls.key_file"));
  }
  SECTION("a missing certificate file") {
    config.redis.tls.cert_file = "/nonexistent/client.pem";
    config.redis.tls.key_file = cert("client.key");
    CHECK_THAT(failure_of(config), Contains("redis.tls.cert_file: cannot read '/nonexistent/client.pem'"));
  }
}

TEST_CASE("a server that demands a client certificate refuses none and a wrong one", "[tls]") {
  RedisServer redis({}, ServerTls{.auth_clients = true});
  dlock::Config config = redis.config();
  SECTION("none given") {
    config.redis.tls.cert_file.clear();
    config.redis.tls.key_file.clear();
    // "demands a client certificate", or when the server's close resets the
    // connection before its alert is read, "may have refused the client certificate".
    const std::string message = failure_of(config);
    CHECK_THAT(message, Contains("client certificate"));
    CHECK_THAT(message, Contains("set redis.tls.cert_file and redis.tls.key_file"));
  }
  SECTION("one its CA did not sign") {
    config.redis.tls.cert_file = cert("server.pem");
    config.redis.tls.key_file = cert("server.key");
    CHECK_THAT(failure_of(config), Contains("refused the client certificate"));
  }
}
