#include "cudal1/search/exemplar_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace cudal1::search {
namespace {

double score(const PoolMember& m) {
  return std::log(std::max(m.speedup, 1e-6));
}

std::vector<std::size_t> all_indices(std::size_t n) {
  std::vector<std::size_t> out(n);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

// Adds distinct members drawn uniformly from `candidates` until `chosen` holds `k` or none are
// left.
void fill_uniformly(std::vector<std::size_t>& chosen, std::vector<std::size_t> candidates,
                    std::size_t k, std::mt19937_64& rng) {
  std::erase_if(candidates, [&](std::size_t i) {
    return std::find(chosen.begin(), chosen.end(), i) != chosen.end();
  });
  std::shuffle(candidates.begin(), candidates.end(), rng);
  for (std::size_t i = 0; i < candidates.size() && chosen.size() < k; ++i)
    chosen.push_back(candidates[i]);
}

class RandomSampler final : public ExemplarSampler {
 public:
  std::vector<std::size_t> choose(const std::vector<PoolMember>& pool, std::size_t k, int,
                                  std::mt19937_64& rng) const override {
    std::vector<std::size_t> chosen;
    fill_uniformly(chosen, all_indices(pool.size()), k, rng);
    return chosen;
  }
  std::string name() const override { return "random"; }
};

class BucketSampler final : public ExemplarSampler {
 public:
  explicit BucketSampler(SamplerOptions options) : options_(options) {}

  std::vector<std::size_t> choose(const std::vector<PoolMember>& pool, std::size_t k, int,
                                  std::mt19937_64& rng) const override {
    std::map<long, std::vector<std::size_t>> buckets;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      buckets[static_cast<long>(std::floor(score(pool[i]) / options_.bucket_width))].push_back(i);
    }
    std::vector<std::vector<std::size_t>> members;
    std::vector<double> means;
    for (auto& [key, indices] : buckets) {
      double sum = 0;
      for (auto i : indices) sum += score(pool[i]);
      means.push_back(sum / static_cast<double>(indices.size()));
      members.push_back(std::move(indices));
    }
    std::vector<std::size_t> chosen;
    // K distinct buckets without replacement, each drawn with the softmax rule over the rest.
    while (chosen.size() < k && !members.empty()) {
      const auto probabilities = bucket_probabilities(means, options_.temperature);
      std::discrete_distribution<std::size_t> pick(probabilities.begin(), probabilities.end());
      const std::size_t b = pick(rng);
      std::uniform_int_distribution<std::size_t> inside(0, members[b].size() - 1);
      chosen.push_back(members[b][inside(rng)]);
      members.erase(members.begin() + static_cast<std::ptrdiff_t>(b));
      means.erase(means.begin() + static_cast<std::ptrdiff_t>(b));
    }
    // Fewer buckets than K: the remaining places go to distinct members of any bucket.
    fill_uniformly(chosen, all_indices(pool.size()), k, rng);
    return chosen;
  }
  std::string name() const override { return "bucket"; }

 private:
  SamplerOptions options_;
};

class IslandSampler final : public ExemplarSampler {
 public:
  explicit IslandSampler(SamplerOptions options) : options_(options) {}

  // Each sample index belongs to an island and sees that island's best members (and the
  // reference); with probability `migration` one place goes to the best member of another island.
  std::vector<std::size_t> choose(const std::vector<PoolMember>& pool, std::size_t k,
                                  int sample_index, std::mt19937_64& rng) const override {
    const int islands = std::max(1, options_.islands);
    const int home = sample_index % islands;
    std::vector<std::size_t> local, foreign;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      (pool[i].reference || pool[i].island % islands == home ? local : foreign).push_back(i);
    }
    auto by_speed = [&](std::size_t a, std::size_t b) { return pool[a].speedup > pool[b].speedup; };
    std::sort(local.begin(), local.end(), by_speed);
    std::sort(foreign.begin(), foreign.end(), by_speed);
    std::vector<std::size_t> chosen;
    std::bernoulli_distribution migrate(options_.migration);
    if (!foreign.empty() && k > 1 && migrate(rng)) chosen.push_back(foreign.front());
    for (std::size_t i = 0; i < local.size() && chosen.size() < k; ++i) chosen.push_back(local[i]);
    fill_uniformly(chosen, foreign, k, rng);
    return chosen;
  }
  std::string name() const override { return "islands"; }

 private:
  SamplerOptions options_;
};

}  // namespace

std::vector<double> bucket_probabilities(const std::vector<double>& means, double temperature) {
  if (means.empty()) return {};
  const double t = temperature > 0 ? temperature : 1e-9;
  const double average =
      std::accumulate(means.begin(), means.end(), 0.0) / static_cast<double>(means.size());
  // Shifted by the largest exponent for numerical range; the shift cancels in the normalisation.
  double largest = -INFINITY;
  for (double m : means) largest = std::max(largest, (m - average) / t);
  std::vector<double> p;
  double total = 0;
  for (double m : means) {
    p.push_back(std::exp((m - average) / t - largest));
    total += p.back();
  }
  for (double& x : p) x /= total;
  return p;
}

std::unique_ptr<ExemplarSampler> make_sampler(const std::string& name,
                                              const SamplerOptions& options) {
  if (name == "bucket") return std::make_unique<BucketSampler>(options);
  if (name == "random") return std::make_unique<RandomSampler>();
  if (name == "islands") return std::make_unique<IslandSampler>(options);
  throw std::invalid_argument("unknown sampler '" + name + "': use bucket, random or islands");
}

}  // namespace cudal1::search
