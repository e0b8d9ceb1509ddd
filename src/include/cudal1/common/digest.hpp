// A fast non-cryptographic digest of a byte range (both processes use it: the worker to notice
// changed inputs and outputs, the orchestrator to notice a reused output). Not for anything
// adversarial.
//
// The digest is a sum (mod 2^64) over the range's 8-byte little-endian words, each mixed with
// its index, finished with the bytes after the last whole word and the size. A sum can be taken
// in any order: the worker's digest kernel (src/worker/digest_kernel.cu) sums a device buffer's
// words and must agree with digest_words bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cudal1 {

// The sum over `words` 8-byte words at `data` (no alignment needed).
std::uint64_t digest_words(const std::byte* data, std::size_t words);
// The digest of a `size`-byte range, given the sum over its size / 8 whole words and the
// size % 8 bytes after them.
std::uint64_t digest_finish(std::uint64_t word_sum, const std::byte* tail, std::size_t size);
std::uint64_t digest_bytes(const std::byte* data, std::size_t size);

}  // namespace cudal1
