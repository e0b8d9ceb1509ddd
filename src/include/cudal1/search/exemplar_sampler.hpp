// Which earlier implementations a contrastive prompt shows. CUDA-L1's finding: exemplars drawn
// from score buckets (3.12x mean speedup) beat random exemplars (2.14x); random and island
// sampling are kept for ablations.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cudal1::search {

struct PoolMember {
  std::int64_t candidate_id = 0;
  double speedup = 1.0;  // measured; the reference is 1.00
  int island = 0;        // lineage group (island sampler); the reference belongs to every island
  bool reference = false;
};

struct SamplerOptions {
  // Bucket sampler: members are grouped by ln(speedup) into buckets this wide (0.1 ~ 10 %
  // steps of speedup), and a bucket is drawn with probability proportional to
  // exp((mean score of the bucket - mean over buckets) / temperature), scores being ln(speedup).
  double bucket_width = 0.1;
  double temperature = 0.5;
  // Island sampler: number of islands and the chance to take one exemplar from another island.
  int islands = 4;
  double migration = 0.1;
};

class ExemplarSampler {
 public:
  virtual ~ExemplarSampler() = default;
  // Up to `k` distinct members (indices into `pool`) for the prompt of sample `sample_index`.
  virtual std::vector<std::size_t> choose(const std::vector<PoolMember>& pool, std::size_t k,
                                          int sample_index, std::mt19937_64& rng) const = 0;
  virtual std::string name() const = 0;
};

// "bucket" (default), "random", "islands"; throws std::invalid_argument for other names.
std::unique_ptr<ExemplarSampler> make_sampler(const std::string& name,
                                              const SamplerOptions& options = {});

// The probability of each bucket under the bucket sampler's rule (exposed for tests).
std::vector<double> bucket_probabilities(const std::vector<double>& bucket_mean_scores,
                                         double temperature);

}  // namespace cudal1::search
