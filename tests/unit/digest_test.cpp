#include "cudal1/common/digest.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

namespace cudal1 {
namespace {

std::vector<std::byte> pattern(std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 131 + 7) & 0xFF);
  return bytes;
}

// The worker's device digest sums the whole words on the device and finishes on the host with
// the bytes after the last of them: the same number as the host's digest of the bytes.
TEST(Digest, WordSumFinishedWithTheTailIsTheDigest) {
  for (std::size_t size : {0u, 5u, 8u, 13u, 64u, 1003u}) {
    const auto bytes = pattern(size);
    const std::size_t words = size / 8;
    std::byte tail[8] = {};
    std::memcpy(tail, bytes.data() + words * 8, size % 8);
    EXPECT_EQ(digest_finish(digest_words(bytes.data(), words), tail, size),
              digest_bytes(bytes.data(), size))
        << size;
  }
}

TEST(Digest, EveryByteAndItsPlaceCounts) {
  const auto original = pattern(61);  // seven whole words and five bytes after them
  const std::uint64_t reference = digest_bytes(original.data(), original.size());
  std::set<std::uint64_t> seen{reference};
  for (std::size_t i = 0; i < original.size(); ++i) {
    auto changed = original;
    changed[i] ^= std::byte{1};
    EXPECT_TRUE(seen.insert(digest_bytes(changed.data(), changed.size())).second) << i;
  }
  // Two words swapped: the same words, in other places.
  auto swapped = original;
  std::memcpy(swapped.data(), original.data() + 8, 8);
  std::memcpy(swapped.data() + 8, original.data(), 8);
  EXPECT_NE(digest_bytes(swapped.data(), swapped.size()), reference);
  // Zeros of different lengths.
  const std::vector<std::byte> zeros(32);
  EXPECT_NE(digest_bytes(zeros.data(), 16), digest_bytes(zeros.data(), 24));
  EXPECT_NE(digest_bytes(zeros.data(), 0), digest_bytes(zeros.data(), 3));
}

}  // namespace
}  // namespace cudal1
