// How bench, optimize and serve reach evaluations: submit or evaluate a request, whatever runs
// it. LocalEvaluator (cudal1/eval/local_evaluator.hpp) runs them on this machine's devices;
// QueueEvaluator (cudal1/queue/queue_evaluator.hpp) sends them to workers on other hosts.
#pragma once

#include <future>
#include <nlohmann/json.hpp>

#include "cudal1/eval/evaluation.hpp"
#include "cudal1/eval/toolchain.hpp"

namespace cudal1 {

class Evaluator {
 public:
  virtual ~Evaluator() = default;

  // Starts an evaluation; blocks while max_in_flight are running. An InputError (unusable task
  // or candidate) or an internal error is delivered through the future.
  virtual std::future<Verdict> submit(EvalRequest request) = 0;
  // Runs an evaluation and waits for its verdict (the same errors, thrown).
  virtual Verdict evaluate(const EvalRequest& request) = 0;

  // The toolchain the evaluations run with (Python, PyTorch, whether CUDA is there). Throws
  // when it cannot be known (the worker cannot start PyTorch, no remote worker answers).
  virtual const Toolchain& toolchain() = 0;
  // worker: the program that checks sources statically on this machine; build_jobs and
  // max_in_flight: how much the caller may keep going at once.
  virtual const EngineConfig& config() const = 0;
  // This engine's pools of workers so far, by pool, for monitoring: {"ready_workers": {made,
  // taken, ...}, "kept_references": {kept, taken, evicted, expired, ...}}. Empty where the
  // workers are on other hosts.
  virtual nlohmann::json worker_pools() { return nlohmann::json::object(); }
};

}  // namespace cudal1
