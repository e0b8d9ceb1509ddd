#include "cudal1/task/cuda_usage.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace cudal1 {
namespace {

// Enough to find the places in the file; a long list would bury the advice.
constexpr std::size_t kPlacesShown = 3;

std::string places(const std::vector<std::string>& found) {
  const std::size_t shown = std::min(found.size(), kPlacesShown);
  std::string text = fmt::format("{}", fmt::join(found.begin(), found.begin() + shown, ", "));
  if (found.size() > shown) text += fmt::format(" and {} more", found.size() - shown);
  return text;
}

constexpr const char* kWhatToDo = "evaluate it with --device cuda on a machine with a GPU";

}  // namespace

std::optional<std::string> cuda_build_on_cpu(const SourceInfo& candidate, const std::string& device,
                                             bool device_was_auto) {
  if (device != "cpu" || candidate.cuda_builds.empty()) return std::nullopt;
  return fmt::format(
      "the candidate builds CUDA code ({}) and the device is the CPU{}, where CUDA code can "
      "neither be built nor run: {}",
      places(candidate.cuda_builds),
      device_was_auto ? " (--device auto: PyTorch sees no GPU here)" : "", kWhatToDo);
}

std::string cuda_call_hint(const SourceInfo& candidate, const std::string& device) {
  // A candidate that builds CUDA code was refused before it ran, with its own reason.
  if (device != "cpu" || candidate.cuda_calls.empty() || !candidate.cuda_builds.empty()) return {};
  return fmt::format(
      " (the candidate puts work on a CUDA device: {}, and the device is the CPU; "
      "if it needs a GPU, {})",
      places(candidate.cuda_calls), kWhatToDo);
}

}  // namespace cudal1
