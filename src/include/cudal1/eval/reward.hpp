// The RL reward derived from a verdict.
#pragma once

namespace cudal1 {

// The speedup rounded to two decimals toward 1.00, so measurement noise never rounds a result
// up: 1.237 -> 1.23, 0.876 -> 0.88. Non-positive or non-finite speedups give 0.
double conservative_reward(double speedup);

}  // namespace cudal1
