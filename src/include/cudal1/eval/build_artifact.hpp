// A candidate's build folder as one blob, to move a build made on one host (a build worker) to
// the host that evaluates the candidate: its regular files and folders with their modification
// times (ninja finds the unpacked build up to date only with them), nothing else. Unpacking
// trusts no path in it: every name stays inside the target folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace cudal1 {

// The largest blob packed or unpacked (Redis strings stop at 512 MiB).
inline constexpr std::uint64_t kMaxArtifactBytes = 256ull << 20;

struct PackedFolder {
  std::string blob;
  std::size_t files = 0;
  std::size_t skipped = 0;  // symbolic links and other non-regular files, left out
};

// Throws std::runtime_error when the folder's files add up to more than `max_bytes`.
PackedFolder pack_folder(const std::filesystem::path& folder,
                         std::uint64_t max_bytes = kMaxArtifactBytes);
// Writes the blob's files under `folder` (created; it must not exist yet). Throws
// std::runtime_error for a blob that is not one of pack_folder's, or that names a path outside
// the folder; what was written is then removed.
void unpack_folder(std::string_view blob, const std::filesystem::path& folder);

}  // namespace cudal1
