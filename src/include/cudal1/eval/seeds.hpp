// Seeds of one evaluation, all derived from one master seed so `--seed` replays a run exactly.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace cudal1 {

struct SeedPlan {
  std::uint64_t master = 0;
  std::uint64_t init = 0;             // before constructing Model and ModelNew
  std::vector<std::uint64_t> trials;  // one get_inputs() draw per correctness trial
  std::uint64_t timing = 0;           // first input set of the timing pool
  std::uint64_t schedule = 0;         // reference/candidate order and bootstrap resampling
  std::uint64_t warm = 0;             // the inputs of each worker's first call, when it loads

  // A fresh, unpredictable master seed (from the OS entropy source).
  static std::uint64_t fresh_master();
  static SeedPlan derive(std::uint64_t master, std::size_t trials);
  nlohmann::json to_json() const;
};

}  // namespace cudal1
