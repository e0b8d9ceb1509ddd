// `cudal1 bench`: evaluates a suite's solutions with one Evaluator (the local engine: builds in
// parallel on the CPU cores, one timing phase per GPU at a time, tasks spread over the GPUs; or
// the workers of a queue), against the eager
// reference and the requested baselines; writes OUT/results.jsonl as tasks finish and
// OUT/summary.json at the end. A re-run with the same OUT skips what is already there.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/evaluator.hpp"

namespace cudal1::bench {

struct BenchSettings {
  std::filesystem::path suite;
  std::filesystem::path solutions;  // a .jsonl file or a directory in the suite's layout
  std::filesystem::path out = "cudal1-bench";
  std::string device = "auto";  // see resolve_devices()
  std::vector<std::string> baselines = {"eager"};
  std::vector<int> levels;  // every level when empty
  std::size_t limit = 0;    // every task when 0
  EvalOptions eval;         // its device is set per task
};

struct BenchProgress {
  std::size_t total = 0;    // tasks selected
  std::size_t done = 0;     // tasks with a result, earlier runs included
  std::size_t ok = 0;       // done with status ok
  std::size_t failed = 0;   // done otherwise (missing included)
  std::size_t resumed = 0;  // done by an earlier run
  std::size_t running = 0;  // evaluations in flight
  std::size_t queued = 0;   // evaluations not started
  double elapsed_s = 0;
  std::optional<double> eta_s;  // once a task has finished in this run
};

struct BenchOutcome {
  nlohmann::json summary;
  std::filesystem::path results_file;
  std::filesystem::path summary_file;
  std::size_t evaluated = 0;  // solutions evaluated in this run
  std::size_t resumed = 0;    // tasks whose result an earlier run wrote
  // Tasks left without a result because the engine itself failed (a re-run retries them).
  std::size_t internal_errors = 0;
  bool interrupted = false;
};

class BenchRunner {
 public:
  // Every evaluation goes to `evaluator`, which must outlive the runner (its destructor waits for
  // evaluations still in flight: after an interrupted run, exit the process instead).
  BenchRunner(BenchSettings settings, Evaluator& evaluator);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  void on_progress(std::function<void(const BenchProgress&)> callback);
  void on_warning(std::function<void(const std::string&)> callback);

  // Checks the suite, the solutions and OUT (InputError naming the file and the problem), then
  // evaluates every task without a result. When `*stop` turns true no new evaluation starts and
  // run() returns at once with what is finished (`interrupted`).
  BenchOutcome run(const std::atomic<bool>* stop = nullptr);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::bench
