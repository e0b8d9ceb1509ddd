// Where the review layer finds its files (the hack corpus, the review prompt) when no option
// names them.
#pragma once

#include <filesystem>
#include <string>

namespace cudal1::review {

// `relative` (e.g. "hacks" or "prompts/review.md") under the directory above the running
// binary's when `probe` exists there (a binary in build/ of a checkout), else under the source
// tree cudal1 was built from.
std::filesystem::path locate_resource(const std::filesystem::path& relative,
                                      const std::filesystem::path& probe);

// Now as ISO 8601 UTC ("2026-01-02T03:04:05Z").
std::string utc_timestamp();

}  // namespace cudal1::review
