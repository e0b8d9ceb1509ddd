#include "cudal1/eval/local_evaluator.hpp"

#include <algorithm>
#include <cstdlib>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/eval/gpu_clock.hpp"
#include "engine_state.hpp"

namespace cudal1 {
namespace {

// Ready workers made at once per device: the driver makes contexts one at a time, and a second
// maker's fork, imports and timer overlap the first one's context.
constexpr std::size_t kReadyMakers = 2;

ReferencePoolLimits reference_limits(const EngineConfig& config) {
  ReferencePoolLimits limits;
  if (config.kept_references_per_gpu > 0) limits.per_device = config.kept_references_per_gpu;
  return limits;
}

EngineConfig with_defaults(EngineConfig config) {
  const unsigned cores = usable_cores();
  if (config.build_jobs == 0) config.build_jobs = cores;
  if (config.max_in_flight == 0) config.max_in_flight = 2 * config.build_jobs;
  config.build_jobs = std::min(config.build_jobs, 4096u);
  config.max_in_flight = std::min(config.max_in_flight, 4096u);
  return config;
}

}  // namespace

LocalEvaluator::Shared::Shared(EngineConfig engine)
    : config(with_defaults(std::move(engine))),
      cache(config.cache_dir),
      headers(config.cache_dir / "pch", config.worker, pch_policy_from(std::getenv("CUDAL1_PCH"))),
      cuda_headers(cuda_headers_from(std::getenv("CUDAL1_CUDA_HEADERS"))),
      build_slots(static_cast<std::ptrdiff_t>(config.build_jobs)),
      flight_slots(static_cast<std::ptrdiff_t>(config.max_in_flight)),
      admission(nvml_device_memory),
      ready(
          kReadyMakers,
          [this](const std::string& device_id, double bytes) {
            return device_id == "cpu" || admission.has_room_for_idle(device_id, bytes);
          },
          config.cache_dir / "work"),
      references(reference_limits(config), config.cache_dir / "work") {
  admission.set_reclaim(
      [this](const std::string& device_id) { return references.evict(device_id); });
}

const Toolchain& LocalEvaluator::Shared::toolchain() {
  std::lock_guard<std::mutex> lock(toolchain_mutex_);
  if (!toolchain_) {
    std::filesystem::create_directories(config.cache_dir);
    toolchain_ = Toolchain::load_or_probe(config.worker, config.cache_dir);
  }
  return *toolchain_;
}

LocalEvaluator::LocalEvaluator(EngineConfig config)
    : shared_(std::make_shared<Shared>(std::move(config))) {}

LocalEvaluator::~LocalEvaluator() {
  std::list<Shared::Flight> flights;
  {
    std::lock_guard<std::mutex> lock(shared_->flights_mutex);
    flights.swap(shared_->flights);
  }
  for (auto& flight : flights) flight.thread.join();
}

const Toolchain& LocalEvaluator::toolchain() {
  return shared_->toolchain();
}

const EngineConfig& LocalEvaluator::config() const {
  return shared_->config;
}

nlohmann::json LocalEvaluator::worker_pools() {
  return {{"ready_workers", shared_->ready.stats()},
          {"kept_references", shared_->references.stats()}};
}

LocalEvaluator::HostBuild LocalEvaluator::build_for_host(const BuildJob& job,
                                                         const std::filesystem::path& task,
                                                         const std::filesystem::path& candidate) {
  EvalRequest request;
  request.task = task;
  request.candidate = candidate;
  request.options.device = "cpu";
  request.options.limits.build_s = job.build_s;
  return run_host_build(*shared_, request, job);
}

Verdict LocalEvaluator::evaluate(const EvalRequest& request) {
  return run_evaluation(*shared_, request);
}

std::future<Verdict> LocalEvaluator::submit(EvalRequest request) {
  shared_->flight_slots.acquire();
  auto promise = std::make_shared<std::promise<Verdict>>();
  std::future<Verdict> future = promise->get_future();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<Shared> shared = shared_;
  std::lock_guard<std::mutex> lock(shared_->flights_mutex);
  // Threads of finished evaluations are joined here so a long session does not accumulate them.
  shared_->flights.remove_if([](Shared::Flight& flight) {
    if (!flight.done->load()) return false;
    flight.thread.join();
    return true;
  });
  shared_->flights.push_back({std::thread([shared, promise, done, request = std::move(request)] {
                                try {
                                  promise->set_value(run_evaluation(*shared, request));
                                } catch (...) {
                                  promise->set_exception(std::current_exception());
                                }
                                shared->flight_slots.release();
                                done->store(true);
                              }),
                              done});
  return future;
}

}  // namespace cudal1
