// What the engine's tests share: the fixtures' paths, an engine with the built worker and the
// tests' cache, a short CPU evaluation of a fixture candidate (paths from tests/CMakeLists.txt).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cudal1/eval/local_evaluator.hpp"

namespace cudal1::engine_test {

inline std::filesystem::path data(const std::string& relative) {
  return std::filesystem::path(CUDAL1_TEST_DATA) / relative;
}

// With `ready_workers` (EngineConfig's -1 is auto) and `keep_references` as given.
inline EngineConfig test_engine(int ready_workers = -1, bool keep_references = true) {
  EngineConfig config;
  config.worker = CUDAL1_TEST_WORKER;
  config.cache_dir = CUDAL1_TEST_CACHE;
  config.ready_workers = ready_workers;
  config.keep_references = keep_references;
  return config;
}

// `candidate` of tests/fixtures/candidates against the scale_relu task, on the CPU.
inline EvalRequest request_for(const std::string& candidate) {
  EvalRequest r;
  r.task = data("tasks/scale_relu.py");
  r.candidate = data("candidates/" + candidate);
  r.options.device = "cpu";
  r.options.timing.budget_s = 1.0;
  r.options.timing.noise.min_time_s = 0.2;
  return r;
}

// A verdict's flags but `noisy`, which the machine's load decides.
inline std::vector<std::string> without_noisy(std::vector<std::string> flags) {
  std::erase(flags, "noisy");
  return flags;
}

}  // namespace cudal1::engine_test
