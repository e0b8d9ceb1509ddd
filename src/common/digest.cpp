#include "cudal1/common/digest.hpp"

#include <cstring>

namespace cudal1 {
namespace {

// SplitMix64's finaliser: a bijection of 64-bit words that spreads every input bit.
constexpr std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// What word `i` is mixed with, so that moving a word changes the sum.
constexpr std::uint64_t index_key(std::uint64_t i) {
  return i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

}  // namespace

std::uint64_t digest_words(const std::byte* data, std::size_t words) {
  // Four independent sums: the mixes of neighbouring words overlap in the pipeline.
  std::uint64_t sums[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    for (std::size_t k = 0; k < 4; ++k) {
      std::uint64_t w;
      std::memcpy(&w, data + (i + k) * 8, 8);
      sums[k] += mix(w ^ index_key(i + k));
    }
  }
  for (; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, data + i * 8, 8);
    sums[0] += mix(w ^ index_key(i));
  }
  return sums[0] + sums[1] + sums[2] + sums[3];
}

std::uint64_t digest_finish(std::uint64_t word_sum, const std::byte* tail, std::size_t size) {
  std::uint64_t last = 0;
  std::memcpy(&last, tail, size % 8);
  return mix(word_sum ^ mix(last ^ index_key(size / 8)) ^ mix(static_cast<std::uint64_t>(size)));
}

std::uint64_t digest_bytes(const std::byte* data, std::size_t size) {
  return digest_finish(digest_words(data, size / 8), data + (size / 8) * 8, size);
}

}  // namespace cudal1
