// When to stop timing: the speedup estimate is precise enough, or sampling more cannot help.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace cudal1 {

struct TimingProgress {
  std::size_t pairs = 0;                // kept reference/candidate sample pairs
  double elapsed_s = 0;                 // since the first timed sample
  double relative_noise = 0;            // half-width of the speedup's 95 % CI over the speedup
  std::optional<double> bucket_spread;  // see BucketCheck; nullopt while too few samples
};

class NoiseCriterion {
 public:
  struct Params {
    // Target relative noise of the speedup (95 % CI half-width / speedup).
    double max_noise = 0.01;
    // Enough pairs for the bootstrap and the bucket check to mean something (5 buckets of 4).
    std::size_t min_samples = 20;
    // Long enough to span clock ramps and allocator warm-up that the warm-up calls missed
    // (docs/evaluation.md, "Defaults").
    double min_time_s = 0.25;
    // Bounded so a fast kernel cannot keep the GPU busy on samples it no longer needs.
    std::size_t max_samples = 20000;
    // Largest spread of per-bucket speedups (relative) accepted as stationary.
    double max_bucket_spread = 0.03;
  };

  enum class Decision { kContinue, kConverged, kSampleLimit };

  NoiseCriterion() = default;
  explicit NoiseCriterion(Params params) : params_(params) {}

  Decision decide(const TimingProgress& progress) const;
  const Params& params() const { return params_; }
  nlohmann::json to_json() const;

 private:
  Params params_;
};

}  // namespace cudal1
