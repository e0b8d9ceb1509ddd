// The evaluation engine: many evaluations in flight, candidate builds in parallel on the CPU
// cores, and each device given to one correctness-and-timing phase at a time (a lock that also
// holds across processes).
#pragma once

#include <future>
#include <memory>

#include "cudal1/eval/evaluation.hpp"
#include "cudal1/eval/toolchain.hpp"

namespace cudal1 {

class Evaluator {
 public:
  explicit Evaluator(EngineConfig config = {});
  ~Evaluator();  // waits for the evaluations in flight
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Starts an evaluation; blocks while max_in_flight are running. An InputError (unusable task
  // or candidate) or an internal error is delivered through the future.
  std::future<Verdict> submit(EvalRequest request);
  // Runs an evaluation on the calling thread.
  Verdict evaluate(const EvalRequest& request);

  // Probed once, on first use. Throws when the worker cannot start PyTorch.
  const Toolchain& toolchain();
  const EngineConfig& config() const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace cudal1
