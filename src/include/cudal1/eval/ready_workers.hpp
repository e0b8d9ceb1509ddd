// Ready workers: reference and candidate workers started ahead of the evaluations that will use
// them. Each is a fork of its device's warm zygote (cudal1/eval/worker_forks.hpp), contained as
// every worker is (its own namespaces, limits, cgroup and, in root mode, user; no capabilities),
// that has made its device's context (`prepare_device`) and nothing else: no task, no candidate,
// no timer and no role yet. An evaluation takes one instead of forking a worker of its own; its
// task, candidate and build are then copied into the worker's folder, which its view already
// shows (read-only), its role's variables come with its load, and from there on it is that
// evaluation's worker alone: it serves one role of one evaluation and is discarded, as any other.
//
// Why: the driver makes CUDA contexts one at a time, about 0.17 s each on an H100, however many
// processes ask (bench/diag/context_contention.py); with 32 evaluations in flight a worker's load
// waited 15 of its 17 s for its context. Made ahead, a few at a time and only where the device has
// room for them, contexts leave the evaluations' path. (Under that load they did not: every
// context, the makers' too, took 16 s; bench/results/2026-11-28-ready-workers.md. Each live
// context makes every new one slower, so the engine makes them only while its device is quiet:
// DeviceAdmission::has_room_for_idle.)
// docs/evaluation.md ("Ready workers") has the design and why it is safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/eval/worker_client.hpp"
#include "cudal1/eval/worker_sandbox.hpp"

namespace cudal1 {

// How the ready workers of one kind are made: every evaluation that would fork workers alike
// (same device, containment, limits and timer) gives the same recipe.
struct ReadyRecipe {
  std::string key;         // workers of equal keys are interchangeable
  std::size_t target = 0;  // ready workers kept
  // Without role, inputs or build: contain_worker with `ready` and `forked` set.
  // (Its memory_bytes and cpu_seconds are the workers' limits, as for every worker.)
  WorkerContainment containment;
  SandboxPolicy policy = SandboxPolicy::kAuto;
  double prepare_s = 300;   // how long prepare_device may take
  std::string device_id;    // how admission names the device: "cpu" or the GPU's UUID
  double device_bytes = 0;  // what one ready worker takes on the device (its context)
};

struct ReadyWorker {
  std::unique_ptr<WorkerClient> client;
  ContainedCommand contained;
  nlohmann::json parts;  // prepare_device's load_parts: its context, seconds
  std::filesystem::path log;
};

class ReadyWorkers {
 public:
  // Whether one more ready worker may take `bytes` on a device now (DeviceAdmission::has_room).
  using Room = std::function<bool(const std::string& device_id, double bytes)>;

  // `makers`: workers made at once per recipe; their logs go under `work_root` until taken.
  ReadyWorkers(std::size_t makers, Room room, std::filesystem::path work_root);
  ~ReadyWorkers();  // ends the makers and every worker not taken
  ReadyWorkers(const ReadyWorkers&) = delete;
  ReadyWorkers& operator=(const ReadyWorkers&) = delete;

  // Starts the makers of `recipe` where they have not started: the first ones are under way
  // when this returns (a take() right after it waits for them).
  void prepare(const ReadyRecipe& recipe);
  // A ready worker made for `recipe` (the longest ready first), or one being made that nobody
  // waits for yet (waited for); nullopt where there is none (the caller forks its own). The
  // first call for a recipe starts its makers (prepare).
  std::optional<ReadyWorker> take(const ReadyRecipe& recipe);
  // Made and not taken yet.
  std::size_t available(const std::string& key);
  // {made, taken, waited, failed, last_error}, over all recipes.
  nlohmann::json stats();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The spec of `containment`'s worker as contain_worker contained it (`contained`): named by its
// role, watched for its memory and CPU limits, writing `log`.
WorkerSpec contained_spec(const WorkerContainment& containment, const ContainedCommand& contained,
                          const std::filesystem::path& log);

}  // namespace cudal1
