// The TLS client contexts: built from the CA, certificate and key files with a message per
// bad file, cached per config, and built again when a file changes.
#include "tls/tls_context.hpp"

#include <openssl/err.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

struct CachedContext {
  std::string files_stamp;  // sizes and modification times of the files it was built from
  std::shared_ptr<SSL_CTX> context;
};

std::string stamp_of(const std::string& path) {
  if (path.empty()) return "-";
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  const auto changed = std::filesystem::last_write_time(path, error);
  return std::to_string(size) + "@" + std::to_string(changed.time_since_epoch().count());
}

std::string openssl_reason() {
  const unsigned long error = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = error != 0 ? ERR_reason_error_string(error) : nullptr;
  return reason != nullptr ? reason : "no detail from OpenSSL";
}

class ContextBuilder {
 public:
  ContextBuilder(const TlsConfig& tls, const std::string& endpoint) : tls_(tls), endpoint_(endpoint) {}

  std::shared_ptr<SSL_CTX> build() {
    ERR_clear_error();
    std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    if (!context) throw ConnectionError(where() + "cannot set up TLS (" + openssl_reason() + ")");
    SSL_CTX* raw = context.get();
    SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
    // One recv() per reply rather than one for each record's header and one for its body.
    SSL_CTX_set_read_ahead(raw, 1);
    // An encrypted key would make OpenSSL ask for its passphrase on the terminal: refuse it instead.
    SSL_CTX_set_default_passwd_cb(raw, [](char*, int, int, void*) { return 0; });
    if (tls_.verify) {
      SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
      if (tls_.ca_file.empty()) {
        if (SSL_CTX_set_default_verify_paths(raw) != 1) {
          throw ConnectionError(where() + "cannot load the system's CA certificates (" + openssl_reason() +
                                "); set redis.tls.ca_file to the CA bundle that signed the server's certificate");
        }
      } else {
        readable("redis.tls.ca_file", tls_.ca_file);
        if (SSL_CTX_load_verify_locations(raw, tls_.ca_file.c_str(), nullptr) != 1) {
          throw invalid("redis.tls.ca_file", tls_.ca_file, "holds no valid PEM certificate");
        }
      }
    } else {
      SSL_CTX_set_verify(raw, SSL_VERIFY_NONE, nullptr);
    }
    if (!tls_.cert_file.empty()) {
      readable("redis.tls.cert_file", tls_.cert_file);
      if (SSL_CTX_use_certificate_chain_file(raw, tls_.cert_file.c_str()) != 1) {
        throw invalid("redis.tls.cert_file", tls_.cert_file, "holds no valid PEM certificate");
      }
      readable("redis.tls.key_file", tls_.key_file);
      if (SSL_CTX_use_PrivateKey_file(raw, tls_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        throw invalid("redis.tls.key_file", tls_.key_file, "holds no valid unencrypted PEM private key");
      }
      if (SSL_CTX_check_private_key(raw) != 1) {
        throw invalid("redis.tls.key_file", tls_.key_file,
                      "is not the private key of redis.tls.cert_file '" + tls_.cert_file + "'");
      }
    }
    return context;
  }

 private:
  std::string where() const { return "redis " + endpoint_ + ": "; }

  void readable(const char* setting, const std::string& path) const {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
      throw ConnectionError(where() + setting + ": cannot read '" + path + "' (" + std::strerror(errno) +
                            "); check the path and its permissions");
    }
    std::fclose(file);
  }

  ConnectionError invalid(const char* setting, const std::string& path, const std::string& what) const {
    return ConnectionError(where() + setting + ": '" + path + "' " + what + " (" + openssl_reason() + ")");
  }

  const TlsConfig& tls_;
  const std::string& endpoint_;
};

}  // namespace

std::shared_ptr<SSL_CTX> tls_context(const TlsConfig& tls, const std::string& endpoint) {
  // server_name is per connection, not part of the context.
  const std::string key = tls.ca_file + '\n' + tls.cert_file + '\n' + tls.key_file + '\n' + (tls.verify ? "1" : "0");
  const std::string files_stamp = stamp_of(tls.ca_file) + stamp_of(tls.cert_file) + stamp_of(tls.key_file);
  static std::mutex mutex;
  static std::map<std::string, CachedContext> cache;  // guarded by mutex
  std::lock_guard lock(mutex);
  CachedContext& cached = cache[key];
  if (!cached.context || cached.files_stamp != files_stamp) {
    cached.context = ContextBuilder(tls, endpoint).build();
    cached.files_stamp = files_stamp;
  }
  return cached.context;
}

}  // namespace dlock::detail
