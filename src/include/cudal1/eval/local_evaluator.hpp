// The evaluation engine of this machine: many evaluations in flight, candidate builds in
// parallel on the CPU cores, and each device given to one correctness-and-timing phase at a time
// (a lock that also holds across processes).
#pragma once

#include <memory>

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/eval/remote_builds.hpp"

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
  nlohmann::json worker_pools() override;

  // A build for another host (a build worker's job): made here in the build step's sandbox, for
  // the job's toolchain and GPU architectures, into this engine's build cache under the job's
  // key. Throws InputError when this host's build toolchain differs from the job's, or when
  // builds here are not sandboxed (their paths would differ from the evaluating host's).
  struct HostBuild {
    BuildRecord record;
    bool cached = false;           // found in this host's cache
    bool cacheable = true;         // false: a time-out or crash, not to be kept
    std::filesystem::path folder;  // the build's folder (its TORCH_EXTENSIONS_DIR)
    nlohmann::json cpu_s;          // a build made now: the worker's and the compilers' CPU seconds
  };
  HostBuild build_for_host(const BuildJob& job, const std::filesystem::path& task,
                           const std::filesystem::path& candidate);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace cudal1
