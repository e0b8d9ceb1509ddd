// The evaluation engine of this machine: many evaluations in flight, candidate builds in
// parallel on the CPU cores, and each device given to one correctness-and-timing phase at a time
// (a lock that also holds across processes).
#pragma once

#include <memory>

#include "cudal1/eval/evaluator.hpp"

namespace cudal1 {

class LocalEvaluator final : public Evaluator {
 public:
  explicit LocalEvaluator(EngineConfig config = {});
  ~LocalEvaluator() override;  // waits for the evaluations in flight
  LocalEvaluator(const LocalEvaluator&) = delete;
  LocalEvaluator& operator=(const LocalEvaluator&) = delete;

  std::future<Verdict> submit(EvalRequest request) override;
  // Runs an evaluation on the calling thread.
  Verdict evaluate(const EvalRequest& request) override;

  // Probed once, on first use. Throws when the worker cannot start PyTorch.
  const Toolchain& toolchain() override;
  const EngineConfig& config() const override;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace cudal1
