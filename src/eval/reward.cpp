#include "cudal1/eval/reward.hpp"

#include <algorithm>
#include <cmath>

namespace cudal1 {
namespace {

// The epsilon keeps values that are exact in decimal (1.23 stored as 1.2299999...) from dropping
// a cent.
constexpr double kEpsilon = 1e-9;

}  // namespace

double conservative_reward(double speedup) {
  if (!std::isfinite(speedup) || speedup <= 0) return 0;
  const double cents = speedup * 100.0;
  const double rounded = speedup >= 1 ? std::floor(cents + kEpsilon) : std::ceil(cents - kEpsilon);
  return rounded / 100.0;
}

double interval_reward(double speedup, std::optional<double> ci_low) {
  if (!std::isfinite(speedup) || speedup <= 0) return 0;
  if (!ci_low || !std::isfinite(*ci_low) || *ci_low <= 0) return conservative_reward(speedup);
  const double supported = std::min(speedup, *ci_low);
  return std::floor(supported * 100.0 + kEpsilon) / 100.0;
}

}  // namespace cudal1
