// Reference workers kept between the evaluations of one task. The reference side runs only the
// task's own code (trusted), so the worker that served one evaluation of a task can serve the
// next evaluation of the same task on the same device and containment: between the two it forgets
// everything of the first (op `reset`: model, inputs, pools, trace, device gate) and builds the
// model again with the next one's init seed (op `reload`), in the process, CUDA context, timer
// and task module it has. The candidate's side is never kept: every candidate still gets a fresh
// process, and no candidate shares a process with anything.
//
// Why: with 32 evaluations in flight on one H100 the driver made about 1.4 contexts a second, and a
// verdict took about 4.2 of them (a reference and a candidate per timing round), which bounded the
// rate near 1,200 rewards an hour (bench/results/2026-11-28-ready-workers.md). A kept reference
// makes no context and no model allocation from the driver. (One hardware queue per context,
// TimingConfig::cuda_connections, made contexts about 4 times cheaper since; the allocations
// still hold the driver's host-wide lock.)
//
// With a limit per task (EngineConfig::references_per_task), an evaluation that finds none kept
// and that many of its task's references in use waits for one to be kept (take_when_free), so
// that a GRPO group's variants share a few references instead of starting one each: on one host
// the driver's rate of new contexts is shared by all its GPUs (bench/results/2026-11-28-levers.md).
//
// Kept workers are idle (nothing of theirs runs), at most `per_key` per task and kind and
// `per_device` per GPU (`per_cpu` on the CPU; the least recently kept goes first), for `idle_s` at
// most, and for `max_uses` evaluations at most; evict() gives one back for an evaluation that
// needs its memory (DeviceAdmission's reclaim). docs/evaluation.md ("Kept references") has why it
// is safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cudal1/eval/worker_client.hpp"

namespace cudal1 {

struct KeptReference {
  std::unique_ptr<WorkerClient> client;
  std::string device_id;  // admission's name of its device: "cpu" or the GPU's UUID
  std::string device;     // the device its requests name ("cuda:0" inside its view)
  std::vector<std::filesystem::path> input_paths;  // where it found the task
  nlohmann::json sandbox;                          // how it is contained (the verdict's sandbox)
  std::filesystem::path log;                       // its log while it is kept
  std::size_t uses = 0;                            // evaluations it served
  std::uint64_t id = 0;                            // ReferencePool::next_id(), from its start
  // While an evaluation uses it: counts it among its task's references in use
  // (ReferencePool::lease); keep() ends it.
  std::shared_ptr<void> lease;
};

// What ReferencePool::take_when_free gives: a kept worker (with its lease), or none and the
// lease for the one the evaluation is to start (null where it gave up).
struct ReferenceTurn {
  std::optional<KeptReference> kept;
  std::shared_ptr<void> lease;
};

struct ReferencePoolLimits {
  // A GRPO group's variants of a task (8 in CUDA-L1's steps) run side by side, a reference each.
  std::size_t per_key = 8;
  // Kept workers per GPU, all tasks together: 24 contexts and models stay under a third of an
  // 80 GB device for most tasks, and admission takes them back where evaluations need the room.
  std::size_t per_device = 24;
  // And on the CPU, where each holds a process's memory (a few hundred MB with PyTorch).
  std::size_t per_cpu = 4;
  // A task not evaluated for two minutes gives its memory back.
  double idle_s = 120;
  // Bounds what one process carries from evaluation to evaluation: its allocator's
  // fragmentation, and its CPU time, which the worker's CPU limit counts from its start.
  std::size_t max_uses = 32;
};

class ReferencePool {
 public:
  // Logs of kept workers go under `work_root` while they wait.
  ReferencePool(ReferencePoolLimits limits, std::filesystem::path work_root);
  ~ReferencePool();  // shuts down every kept worker
  ReferencePool(const ReferencePool&) = delete;
  ReferencePool& operator=(const ReferencePool&) = delete;

  // A kept worker of `key` (the most recently kept) but those of `used` (an evaluation's rounds
  // each need a process of their own), leased, or nullopt. One found dead is dropped on the way.
  std::optional<KeptReference> take(const std::string& key, const std::set<std::uint64_t>& used);
  // Waits until a kept worker of `key` but those of `used` can be taken, or fewer than `limit`
  // of `key`'s workers are leased, or `deadline`: the worker taken, or the lease of one to start
  // (counted at once, so that evaluations asking together do not all start one). `cancelled()`
  // is asked every quarter second: then neither. `limit` 0 waits for nothing.
  ReferenceTurn take_when_free(const std::string& key, const std::set<std::uint64_t>& used,
                               std::size_t limit, Clock::time_point deadline,
                               const std::function<bool()>& cancelled);
  // A reference worker of `key` in use by an evaluation (started, or taken): counted as leased
  // until the returned lease is destroyed, which wakes take_when_free's waiters.
  std::shared_ptr<void> lease(const std::string& key);
  // The same where fewer than `limit` of `key`'s are leased (0: no limit); null otherwise.
  std::shared_ptr<void> lease_within(const std::string& key, std::size_t limit);
  // An id for a reference worker that may be kept.
  std::uint64_t next_id();
  // Keeps `worker` (reset already, idle) for the next evaluation of `key`, or shuts it down where
  // the limits say so. Its log is moved under the pool's folder first.
  void keep(const std::string& key, KeptReference worker);
  std::size_t available(const std::string& key);
  // Shuts down the kept worker of `device_id` used least recently; false when it keeps none.
  bool evict(const std::string& device_id);
  // Shuts down every kept worker of `device_id` (an evaluation that must run alone).
  void evict_all(const std::string& device_id);
  // {kept, taken, evicted, expired, retired, dead, waiting, waits, waited_s, wait_timeouts} so
  // far: `waiting` counts idle kept workers, `waits` the evaluations that waited for one.
  nlohmann::json stats();

  const ReferencePoolLimits& limits() const { return limits_; }

  struct State;

 private:
  ReferencePoolLimits limits_;
  std::shared_ptr<State> state_;
};

}  // namespace cudal1
