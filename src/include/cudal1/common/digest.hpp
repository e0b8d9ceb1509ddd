// A fast non-cryptographic digest of a byte range (both processes use it: the worker to notice
// changed inputs, the orchestrator to notice a reused output). Not for anything adversarial.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cudal1 {

std::uint64_t digest_bytes(const std::byte* data, std::size_t size);

}  // namespace cudal1
