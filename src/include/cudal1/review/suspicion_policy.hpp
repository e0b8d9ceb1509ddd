// When a verdict is too good to accept without a second look. CUDA-L1 sends every result above
// a speedup threshold, or far above the best known result for the task, to a reward-checking
// model; we do the same for verdicts that passed every automatic check (status ok).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/eval/verdict.hpp"

namespace cudal1::review {

struct SuspicionPolicy {
  // A 3x speedup over a PyTorch reference is possible, but rare enough on KernelBench-style
  // tasks that reviewing every such result costs little and catches most hacks (CUDA-L1's
  // hacks mostly claimed far more).
  double threshold = 3.0;
  // A jump to more than twice the best speedup verified so far for the task deserves a look
  // even under the threshold.
  double best_known_factor = 2.0;
  std::optional<double> best_known;  // the best verified speedup for the task, when known

  // Why `verdict` must be reviewed ("speedup 4.10x is above the review threshold 3.00x"), or
  // nullopt when it need not be: not ok, not timed, or not suspicious.
  std::optional<std::string> reason(const Verdict& verdict) const;
};

// Whether a verdict's speedup may stand as the task's best known one: trusted, and not a
// suspicious result that no reviewer judged (flag unreviewed). A stored one: its outline().
bool counts_as_best_known(const Verdict& verdict);

}  // namespace cudal1::review
