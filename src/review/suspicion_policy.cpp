#include "cudal1/review/suspicion_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cudal1::review {

std::optional<std::string> SuspicionPolicy::reason(const Verdict& verdict) const {
  if (!verdict.trusted() || !std::isfinite(*verdict.speedup)) return std::nullopt;
  const double speedup = *verdict.speedup;
  if (speedup > threshold) {
    return fmt::format("speedup {:.2f}x is above the review threshold {:.2f}x", speedup, threshold);
  }
  if (best_known && *best_known > 0 && speedup > best_known_factor * *best_known) {
    return fmt::format("speedup {:.2f}x is more than {:g}x the best known {:.2f}x for this task",
                       speedup, best_known_factor, *best_known);
  }
  return std::nullopt;
}

bool counts_as_best_known(const Verdict& verdict) {
  return verdict.trusted() && !verdict.has_flag(flag::kUnreviewed);
}

}  // namespace cudal1::review
