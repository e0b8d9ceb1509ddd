#include "cudal1/eval/stopping_rule.hpp"

namespace cudal1 {

NoiseCriterion::Decision NoiseCriterion::decide(const TimingProgress& p) const {
  if (p.pairs >= params_.max_samples) return Decision::kSampleLimit;
  if (p.pairs < params_.min_samples || p.elapsed_s < params_.min_time_s) return Decision::kContinue;
  if (p.relative_noise > params_.max_noise) return Decision::kContinue;
  if (!p.bucket_spread || *p.bucket_spread > params_.max_bucket_spread) return Decision::kContinue;
  return Decision::kConverged;
}

nlohmann::json NoiseCriterion::to_json() const {
  return {{"max_noise", params_.max_noise},
          {"min_samples", params_.min_samples},
          {"min_time_s", params_.min_time_s},
          {"max_samples", params_.max_samples},
          {"max_bucket_spread", params_.max_bucket_spread}};
}

}  // namespace cudal1
