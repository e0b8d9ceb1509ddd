// cudal1 review: the stored candidates whose verdicts were flagged `unreviewed` (suspiciously
// fast, and no reviewer was configured or the review failed) are shown to the reward-checking
// model now, with the same prompt, hack corpus and verdict rules as a review during optimize
// (docs/review.md). Each distinct code of a task is asked about once; every verdict with that
// code in the selected runs gets the answer. The verdict in the store is updated in place:
// `unreviewed` goes, details["review"] holds the new review with the earlier one under
// "earlier" and the time under "reviewed_at", and a hack becomes status rejected, reward 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cudal1/review/reward_checker.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::data {

struct StoredReviewFilter {
  std::optional<std::int64_t> run;  // only this run
  std::string stage = "all";        // generate, optimize, rl (cudal1 serve) or all
};

struct StoredReviewCounts {
  std::size_t unreviewed = 0;  // verdicts found flagged unreviewed
  std::size_t asked = 0;       // reviews asked (one per distinct code of a task)
  std::size_t legitimate = 0, hack = 0, uncertain = 0, failed = 0;  // by verdict, per verdict
  std::size_t updated = 0;                                          // verdicts changed in the store
};

// Throws std::invalid_argument for an unknown stage or a run the store does not have.
// `progress` (optional) is told each review's outcome as one line.
StoredReviewCounts review_stored(store::Store& store, const review::RewardChecker& checker,
                                 const StoredReviewFilter& filter,
                                 const std::function<void(const std::string&)>& progress = {});

}  // namespace cudal1::data
