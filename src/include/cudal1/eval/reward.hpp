// The RL reward derived from a verdict.
#pragma once

#include <optional>

namespace cudal1 {

// The speedup rounded to two decimals toward 1.00: 1.237 -> 1.23, 0.876 -> 0.88. Non-positive
// or non-finite speedups give 0. The reward of a verdict timed without an interval.
double conservative_reward(double speedup);

// The reward of a timed verdict: never above what its 95 % interval supports. The lower end of
// the interval (the point estimate where that is lower), rounded down to the cent: a speedup of
// 10.01 measured as [0.98, 11.38] pays 0.98, one of 1.876 in [1.85, 1.90] pays 1.85. Without a
// usable lower end, conservative_reward(speedup).
double interval_reward(double speedup, std::optional<double> ci_low);

}  // namespace cudal1
