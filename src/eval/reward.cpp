#include "cudal1/eval/reward.hpp"

#include <cmath>

namespace cudal1 {

double conservative_reward(double speedup) {
  if (!std::isfinite(speedup) || speedup <= 0) return 0;
  // The epsilon keeps values that are exact in decimal (1.23 stored as 1.2299999...) from
  // dropping a cent.
  constexpr double kEpsilon = 1e-9;
  const double cents = speedup * 100.0;
  const double rounded = speedup >= 1 ? std::floor(cents + kEpsilon) : std::ceil(cents - kEpsilon);
  return rounded / 100.0;
}

}  // namespace cudal1
