// gpufeed — SHA-256 and HMAC-SHA256 through OpenSSL's libcrypto, as SigV4 needs them.
//
// The hashes come from libcrypto (EVP_Digest, HMAC), never from code of our own: a signature is
// only as good as its hash, and libcrypto's is the one everybody's is checked against.
#pragma once

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

using sha256_digest = std::array<unsigned char, 32>;

// The lower-case hex of `bytes`.
[[nodiscard]] inline std::string to_hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = hex[bytes[i] >> 4];
    out[2 * i + 1] = hex[bytes[i] & 0xF];
  }
  return out;
}

[[nodiscard]] inline std::string to_hex(const sha256_digest& d) {
  return to_hex(d.data(), d.size());
}

// SHA-256 of `data`; library_error (api EVP_Digest) if libcrypto fails, which it does only when
// it cannot allocate.
[[nodiscard]] inline sha256_digest sha256(std::string_view data) {
  sha256_digest out{};
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 ||
      n != out.size()) {
    error_context c;
    c.api = "EVP_Digest";
    throw library_error("SHA-256 failed in libcrypto", std::move(c));
  }
  return out;
}

// The lower-case hex SHA-256 of `data`: SigV4's payload hash and hashed canonical request.
[[nodiscard]] inline std::string sha256_hex(std::string_view data) { return to_hex(sha256(data)); }

// HMAC-SHA256 of `data` under `key`; library_error (api HMAC) if libcrypto fails.
[[nodiscard]] inline sha256_digest hmac_sha256(const unsigned char* key, std::size_t key_size,
                                               std::string_view data) {
  sha256_digest out{};
  unsigned int n = 0;
  if (HMAC(EVP_sha256(), key, static_cast<int>(key_size),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(),
           &n) == nullptr ||
      n != out.size()) {
    error_context c;
    c.api = "HMAC";
    throw library_error("HMAC-SHA256 failed in libcrypto", std::move(c));
  }
  return out;
}

[[nodiscard]] inline sha256_digest hmac_sha256(const sha256_digest& key, std::string_view data) {
  return hmac_sha256(key.data(), key.size(), data);
}

// Overwrites `bytes` in a way the compiler may not optimise away (OPENSSL_cleanse): for key
// material that must not outlive its use in freed memory.
inline void wipe(void* bytes, std::size_t n) noexcept { OPENSSL_cleanse(bytes, n); }

}  // namespace gpufeed::detail::remote
