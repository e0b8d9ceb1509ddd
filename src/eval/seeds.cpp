#include "cudal1/eval/seeds.hpp"

#include <random>

namespace cudal1 {
namespace {

// Seeds stay below 2^53 so that every JSON consumer (JavaScript included) reads them exactly.
constexpr std::uint64_t kSeedMask = (std::uint64_t{1} << 53) - 1;

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t SeedPlan::fresh_master() {
  std::random_device device;
  const std::uint64_t high = device(), low = device();
  return ((high << 32) ^ low) & kSeedMask;
}

SeedPlan SeedPlan::derive(std::uint64_t master, std::size_t trials) {
  SeedPlan plan;
  plan.master = master;
  std::uint64_t state = master;
  plan.init = splitmix64(state) & kSeedMask;
  for (std::size_t i = 0; i < trials; ++i) plan.trials.push_back(splitmix64(state) & kSeedMask);
  plan.timing = splitmix64(state) & kSeedMask;
  plan.schedule = splitmix64(state) & kSeedMask;
  plan.warm = splitmix64(state) & kSeedMask;  // last: the seeds before it replay as they did
  return plan;
}

nlohmann::json SeedPlan::to_json() const {
  return {{"master", master}, {"init", init},         {"trials", trials},
          {"timing", timing}, {"schedule", schedule}, {"warm", warm}};
}

}  // namespace cudal1
