// SHA-256 (FIPS 180-4), for content-addressed build caching.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cudal1 {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  std::array<std::uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

// HMAC-SHA256 (RFC 2104) of `message` under `key`, in hex: what a build worker signs its
// artifacts with, so that a worker checks they came from a holder of the fleet's build secret.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
// Compares two strings in a time that does not depend on where they first differ.
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace cudal1
