// Bucketed variance check (after CUDA-L1's): the timed pairs are cut, in the order they were
// taken, into equal buckets, and each bucket's speedup is computed on its own. A stationary
// measurement gives buckets that agree; drift (thermal throttling, another tenant, a candidate
// whose speed changes with the call count) shows up as spread between them.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

namespace cudal1 {

struct BucketCheck {
  std::vector<double> speedups;  // median(ref) / median(candidate) within each bucket
  double spread = 0;             // (max - min) / median of the bucket speedups

  nlohmann::json to_json() const;
};

// nullopt when there are fewer than `buckets * min_per_bucket` pairs.
std::optional<BucketCheck> check_buckets(std::span<const double> reference_ms,
                                         std::span<const double> candidate_ms,
                                         std::size_t buckets = 5, std::size_t min_per_bucket = 4);

}  // namespace cudal1
