// State shared by the evaluations of one LocalEvaluator (internal to src/eval).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <thread>

#include "cudal1/eval/build_cache.hpp"
#include "cudal1/eval/device_admission.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/eval/precompiled_headers.hpp"
#include "cudal1/eval/ready_workers.hpp"
#include "cudal1/eval/reference_pool.hpp"

namespace cudal1 {

struct LocalEvaluator::Shared {
  explicit Shared(EngineConfig engine);

  EngineConfig config;
  BuildCache cache;
  PrecompiledHeaders headers;  // torch/extension.h precompiled for the builds (CUDAL1_PCH)
  CudaHeaders cuda_headers;    // how CUDA sources include it (CUDAL1_CUDA_HEADERS)
  std::counting_semaphore<4096> build_slots;
  std::counting_semaphore<4096> flight_slots;

  const Toolchain& toolchain();

  struct Flight {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex flights_mutex;
  std::list<Flight> flights;

  // Evaluations of this engine running now, and started so far: whether an evaluation had
  // company while it ran (run_evaluation's out-of-memory retry).
  std::mutex company_mutex;
  unsigned running = 0;
  std::uint64_t started = 0;

  // Admission of evaluations to each GPU by its free memory (NVML), and the most device memory
  // each task's reference was seen to hold there (by the task text's SHA-256 and device, bytes):
  // what the next evaluation of that task expects its workers to take.
  DeviceAdmission admission;
  std::mutex footprint_mutex;
  std::map<std::string, double> footprints;
  // Workers made ahead for the evaluations to take (after `admission`, which it asks for room,
  // so that it ends first).
  ReadyWorkers ready;
  // Reference workers kept between evaluations of a task (after `admission`, whose waiters
  // reclaim their memory).
  ReferencePool references;

 private:
  std::mutex toolchain_mutex_;
  std::optional<Toolchain> toolchain_;
};

// Runs one evaluation (src/eval/evaluation.cpp; its phases in evaluation_*.cpp).
Verdict run_evaluation(LocalEvaluator::Shared& shared, const EvalRequest& request);
// A build worker's job: the build step alone (src/eval/evaluation_build.cpp).
LocalEvaluator::HostBuild run_host_build(LocalEvaluator::Shared& shared, const EvalRequest& request,
                                         const BuildJob& job);

}  // namespace cudal1
