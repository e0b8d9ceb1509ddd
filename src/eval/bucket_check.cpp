#include "cudal1/eval/bucket_check.hpp"

#include <algorithm>

#include "cudal1/eval/statistics.hpp"

namespace cudal1 {

nlohmann::json BucketCheck::to_json() const {
  return {{"speedups", speedups}, {"spread", spread}};
}

std::optional<BucketCheck> check_buckets(std::span<const double> reference_ms,
                                         std::span<const double> candidate_ms, std::size_t buckets,
                                         std::size_t min_per_bucket) {
  const std::size_t pairs = std::min(reference_ms.size(), candidate_ms.size());
  if (buckets == 0 || pairs < buckets * min_per_bucket) return std::nullopt;
  BucketCheck check;
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = b * pairs / buckets;
    const std::size_t end = (b + 1) * pairs / buckets;
    const double ref = median(reference_ms.subspan(begin, end - begin));
    const double cand = median(candidate_ms.subspan(begin, end - begin));
    check.speedups.push_back(ref / cand);
  }
  const auto [lo, hi] = std::minmax_element(check.speedups.begin(), check.speedups.end());
  check.spread = (*hi - *lo) / median(check.speedups);
  return check;
}

}  // namespace cudal1
