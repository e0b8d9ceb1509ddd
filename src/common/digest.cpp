#include "cudal1/common/digest.hpp"

#include <cstring>

namespace cudal1 {

std::uint64_t digest_bytes(const std::byte* data, std::size_t size) {
  // 64-bit multiply-xorshift over 8-byte words; collisions only matter against accidental
  // equality.
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0xCBF29CE484222325ull ^ (size * kMul);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  for (; i < size; ++i) h = (h ^ static_cast<std::uint64_t>(data[i])) * kMul;
  return h ^ (h >> 32);
}

}  // namespace cudal1
