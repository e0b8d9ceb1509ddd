// One evaluation of a candidate against its task, and the options that shape it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cudal1/common/paths.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/tolerance.hpp"
#include "cudal1/eval/verdict.hpp"
#include "cudal1/eval/worker_sandbox.hpp"

namespace cudal1 {

class BuildService;  // cudal1/eval/remote_builds.hpp

// Ready workers per GPU that auto keeps: about 5 GiB of contexts (618 MiB each on an H100).
// On by default since the CUDA red team passed with them, their timer made at the load
// (2026-11-28; see docs/evaluation.md, "Ready workers"); never on the CPU, which has no context.
inline constexpr std::size_t kReadyWorkersPerGpu = 8;
inline constexpr bool kReadyWorkersByDefault = true;

struct EngineConfig {
  std::filesystem::path worker = default_worker_path();
  std::filesystem::path cache_dir = default_cache_dir();
  std::filesystem::path lock_dir = default_lock_dir();
  unsigned build_jobs = 0;                       // candidate builds at once; 0: one per CPU core
  unsigned max_in_flight = 0;                    // evaluations at once; 0: twice build_jobs
  SandboxPolicy sandbox = SandboxPolicy::kAuto;  // how the workers are contained (--sandbox)
  // Reference and candidate workers forked from a zygote that imported PyTorch once
  // (--warm-workers; cudal1/eval/worker_forks.hpp); false: each worker starts on its own.
  bool warm_workers = true;
  // Forked workers kept ready per device, their context made, for the evaluations to take
  // (--ready-workers; cudal1/eval/ready_workers.hpp): -1 is auto (kReadyWorkersPerGpu on a
  // GPU, none on the CPU); 0 is none. Only with warm workers.
  int ready_workers = -1;
  // A reference worker that served an evaluation serves the next of the same task, its model
  // built again (--keep-references; cudal1/eval/reference_pool.hpp). Only with warm workers.
  bool keep_references = true;
  // How many are kept per GPU, all tasks together (--keep-references N); 0: the pool's default
  // (ReferencePoolLimits::per_device).
  std::size_t kept_references_per_gpu = 0;
  // At most this many reference workers of one task per GPU at once (--task-references N): an
  // evaluation of the task beyond them waits for one to be kept instead of starting its own (a
  // minute at most). 0: no limit. Only with kept references.
  std::size_t references_per_task = 0;
  // How long such an evaluation waits at most, seconds (and half its load's time limit at
  // most); then it starts its own.
  double reference_wait_s = 60;
  // Where the candidates' extension builds may be made instead of here (build workers of a
  // Redis queue); null: always here. Used only for sandboxed builds, whose paths are the same
  // on every host.
  std::shared_ptr<BuildService> remote_builds;
};

// Hard limits: past any of them the worker is killed and the verdict says why.
struct EvalLimits {
  double build_s = 900;            // compiling a candidate (nvcc on PyTorch headers takes minutes)
  double load_s = 300;             // starting PyTorch, importing, constructing the models
  double correctness_s = 300;      // all correctness trials together
  std::uint64_t memory_bytes = 0;  // resident memory per worker process group; 0: half the RAM
  double gpu_memory_fraction =
      0;  // the candidate's share of GPU memory (PyTorch allocator); 0: all
};

struct EvalOptions {
  std::string device = "auto";        // auto | cpu | cuda | cuda:N
  std::optional<std::uint64_t> seed;  // master seed; fresh when absent
  Tolerance tolerance;
  std::size_t trials = 5;
  TimingConfig timing;
  EvalLimits limits;
  bool trace_activity = true;          // CUPTI records of every timed call (GPU)
  bool require_custom_kernel = false;  // no kernel of the candidate's own ran -> rejected
  bool keep_workdir = false;           // keep logs of the worker processes
  std::function<void(const std::string&)> progress;  // phase updates for people
};

struct EvalRequest {
  std::filesystem::path task;
  std::filesystem::path candidate;
  EvalOptions options;
};

}  // namespace cudal1
