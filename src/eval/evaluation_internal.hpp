// One evaluation, split by phase over src/eval/evaluation*.cpp (internal to src/eval):
//   evaluation.cpp              the run, and correctness and timing as a driver of the phases
//   evaluation_build.cpp        the workers' environment and containment, the candidate's build
//   evaluation_workers.cpp      starting, loading and staging the workers of the timing rounds
//   evaluation_references.cpp   kept references: taking one, waiting for one, giving them back
//   evaluation_rounds.cpp       the timing rounds and how they are joined
//   evaluation_calibration.cpp  the calibration of the processes' offsets, the bandwidth cache
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/eval/build_cache.hpp"
#include "cudal1/eval/correctness.hpp"
#include "cudal1/eval/device_lock.hpp"
#include "cudal1/eval/findings.hpp"
#include "cudal1/eval/gpu_clock.hpp"
#include "cudal1/eval/memory_ledger.hpp"
#include "cudal1/eval/seeds.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/worker_client.hpp"
#include "cudal1/eval/worker_sandbox.hpp"
#include "cudal1/task/source_check.hpp"
#include "engine_state.hpp"

namespace cudal1 {

// An allocator's failure as a worker reports it: PyTorch's CUDA and CPU allocators ("CUDA out
// of memory. Tried to allocate ...", OutOfMemoryError, "can't allocate memory"), the CUDA
// runtime ("CUDA error: out of memory", cudaErrorMemoryAllocation), cuBLAS and cuDNN
// (STATUS_ALLOC_FAILED), a compiler ("Cannot allocate memory").
bool is_out_of_memory(std::string_view message);

// CUDAL1_DEVICE_GATE=0: the workers' loads leave the device gate out (evaluation_workers.cpp).
bool device_gate_off();

struct BuildOutcome {
  BuildRecord record;
  bool cached = false;
  bool skipped = false;  // nothing to build: no build process was started
  std::string key;
  // A build made now: the CPU seconds of its worker itself and of the compilers it ran.
  nlohmann::json cpu_s;
  // The nice value the build's process group took (lower_cpu_priority, when the fork started).
  nlohmann::json autogroup_nice;
  // A build made now: the precompiled header's policy, whether it was ready (and with what).
  nlohmann::json pch;
  // A build made by a build worker (EngineConfig::remote_builds): where and how.
  nlohmann::json remote;
  bool cacheable = true;  // false: a time-out or crash of the build, not kept
  // Seconds this build waited for one of the host's build slots (EngineConfig::build_jobs).
  double slot_wait_s = 0;
};

// Removes an evaluation's work folder when the evaluation ends, unless it is to be kept.
struct WorkdirCleanup {
  const std::filesystem::path& dir;
  bool keep;
  ~WorkdirCleanup() {
    std::error_code ec;
    if (!keep) std::filesystem::remove_all(dir, ec);
  }
};

class Evaluation {
 public:
  // `alone`: the device's evaluations of every process on this host (those that share its lock
  // folder) have ended before this one starts its workers, and none starts until it ends (the
  // retry of an evaluation that ran out of memory beside others, run_evaluation).
  Evaluation(LocalEvaluator::Shared& shared, const EvalRequest& request, bool alone = false)
      : shared_(shared), request_(request), options_(request.options), alone_(alone) {}

  Verdict run();
  // A build worker's job: the build step alone, for the job's toolchain, under its key.
  LocalEvaluator::HostBuild build_for_host(const BuildJob& job);

 private:
  struct StartedWorker {
    std::unique_ptr<WorkerClient> client;
    nlohmann::json load_reply;  // the load request until load() replaces it with the reply
    double spawn_s = 0;         // starting its process (a fork of the zygote, or a program)
    bool ready = false;         // a ready worker (ready_workers.hpp), taken instead
    bool kept = false;          // a kept reference (reference_pool.hpp), taken instead
    // A reference whose process load() is to find: its task's limit of references in use was
    // reached (EngineConfig::references_per_task), so it waits for one of them to be kept.
    bool awaiting = false;
    std::size_t round = 0;  // the timing round it was started for (names its log)
    // A reference that may be kept for the next evaluation of its task: how it was contained
    // and its lease (its client is moved in when it is kept).
    std::optional<KeptReference> keepable;
  };
  struct WorkerPair {
    StartedWorker reference;
    StartedWorker candidate;
    std::size_t prewarmed_sets = 0;  // the input sets its warm-up took under the shared hold
  };
  // What the correctness trials and the timing phase run with, destroyed in reverse order: the
  // exclusive hold first, then the shared holds, then the clock.
  struct TimingPlace {
    std::string device_id;            // names the device's locks: "cpu" or the GPU's UUID
    std::unique_ptr<GpuClock> clock;  // null on the CPU or where the GPU's clock cannot be read
    std::optional<SharedDeviceHolds> shared;       // the trials' holds
    std::optional<ExclusiveDeviceHold> exclusive;  // while timing
  };
  // The timing rounds of one evaluation as they go.
  struct TimingRounds {
    bool adaptive = false;  // --timing-rounds auto
    std::size_t count = 0;  // rounds planned (the most there may be, when adaptive)
    std::vector<TimingOutcome> done;
    nlohmann::json decisions = nlohmann::json::array();  // after each adaptive round
    // A precision or library choice made per process moves the candidate between processes.
    bool per_process_choice = false;
    double budget_left = 0;
    double restart_s = 0;
    std::size_t released = 0;  // times the device was given back while more workers loaded
  };
  // Errors keep their whole first line (common first_line's limit).
  static constexpr std::size_t kWholeLine = std::string::npos;

  void report(const std::string& message) const {
    if (options_.progress) options_.progress(message);
  }
  static Clock::time_point after(double seconds) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  static std::uint64_t physical_memory_bytes();
  // What can be allocated without swapping (MemAvailable), or the physical memory where unknown.
  static double available_memory_bytes();

  // --- evaluation.cpp: the run and the driver of correctness and timing.
  // The toolchain probe runs while the sources are checked and the reference starts.
  const Toolchain& toolchain() { return *toolchain_.get(); }
  Verdict build_and_measure(const SourceInfo& candidate);
  Verdict candidate_failure(Status status, const std::string& error, const std::string& log);
  // A pair's warm-up under the shared holds (prewarm_timing), added to phases.prewarm; the
  // input sets it took.
  std::size_t warm_before_timing(WorkerClient& reference, WorkerClient& candidate,
                                 const TimingConfig& config, DeviceHolds& holds,
                                 Clock::time_point deadline);
  Verdict correctness_and_timing(StartedWorker& reference, StartedWorker& candidate,
                                 const std::string& build_key);
  // The hold requests carry where both workers have a device gate; null where this process
  // holds the device around each call.
  nlohmann::json worker_device_hold(const StartedWorker& reference, const StartedWorker& candidate,
                                    const std::string& device_id);
  // The first calls and the correctness trials; a verdict when the candidate failed them.
  std::optional<Verdict> check_correctness(WorkerClient& reference, WorkerClient& candidate,
                                           DeviceHolds& holds, Clock::time_point deadline,
                                           CorrectnessOutcome& correctness);
  // The verdict for a candidate that failed during `phase` of the trials' part (rethrows what is
  // the reference's failure).
  Verdict trials_failure(const std::exception_ptr& error, WorkerClient& candidate,
                         const char* phase);
  // The joined timing into the verdict (status ok).
  void record_timing(TimingOutcome& timing, const StartedWorker& reference, const GpuClock* clock);
  nlohmann::json device_description(const nlohmann::json& load_reply, const GpuClock* clock) const;

  // --- evaluation_build.cpp: the workers' processes and the candidate's build.
  std::map<std::string, std::string> worker_environment(bool builds);
  // A worker's process, contained per the engine's sandbox policy (worker_sandbox.hpp): the
  // containment's role, program, device, private directory and limits are filled in here.
  // `device` becomes the name of the device inside; `description` (when given) how it is
  // contained, as the verdict's sandbox says.
  WorkerSpec contained_worker(WorkerContainment containment, const std::filesystem::path& log,
                              std::string& device, nlohmann::json* description = nullptr);
  // What contained_worker fills in of a containment (and the private directory it names).
  void complete_containment(WorkerContainment& containment);
  // RLIMIT_CPU of a reference's or candidate's processes (as cpu_seconds_for counts).
  std::uint64_t worker_cpu_seconds() const;
  // RLIMIT_CPU of a worker's processes: a backstop past its time limits, with every core busy.
  static std::uint64_t cpu_seconds_for(double wall_seconds);
  std::uint64_t memory_limit() const;
  BuildOutcome ensure_built(const SourceInfo& candidate);
  // The build made by a build worker (EngineConfig::remote_builds), under the cache's lock for
  // `key`; nullopt when none can take it (then it is made here).
  std::optional<BuildOutcome> build_elsewhere(const std::string& key);
  // Whether this host's builds run in the sandbox, where their folder has the same path on
  // every host.
  bool builds_sandboxed() const;

  // --- evaluation_workers.cpp: starting, loading and staging workers.
  // Spawns the process (on this thread: see WorkerClient::start); load() then sends the model.
  // Round k > 0 logs to "<side>-round<k+1>.log".
  // `fresh`: never a kept reference (one that failed to load again is being replaced, from a
  // loading thread: then only a forked worker, which no thread's end can kill, will do).
  // `lease`: a reference's lease taken already (ReferencePool::lease_within, take_when_free);
  // null: it takes one.
  StartedWorker start_worker(Side side, const std::string& build_key, std::size_t round = 0,
                             bool fresh = false, std::shared_ptr<void> lease = nullptr);
  // The evaluation's first reference: start_worker's, or one that load() finds (awaiting)
  // where the task has EngineConfig::references_per_task in use.
  StartedWorker start_first_reference();
  void load(StartedWorker& worker, Side side);
  void load_once(StartedWorker& worker, Side side);
  // --- kept references (reference_pool.hpp), in evaluation_references.cpp.
  // The key of this evaluation's reference workers in Shared::references (the task's text, the
  // device, containment, limits and timer), set by the first start; empty: none is kept.
  std::string reference_key();
  // A load request's common part (op::kLoad, or op::kReload for a kept reference).
  nlohmann::json load_request(const char* op, const std::string& role,
                              const std::string& device) const;
  // A worker made before this evaluation (ready, or kept): its log `log` moves to this
  // evaluation's log of `side` and `round`, and its failures and CPU become this evaluation's.
  void adopt(WorkerClient& client, const std::string& role, const std::filesystem::path& log,
             Side side, std::size_t round);
  // A kept reference of this task, assigned to this evaluation with its reload request; nullopt
  // where none is kept.
  std::optional<StartedWorker> take_kept_reference(std::size_t round);
  // `kept` taken from the pool, assigned to this evaluation with its reload request.
  StartedWorker adopt_kept_reference(KeptReference kept, std::size_t round,
                                     Clock::time_point since);
  // An awaiting reference's worker: one of its task's kept for it within the wait's limit, or
  // a fresh one.
  void await_reference(StartedWorker& worker);
  // A reference this evaluation is done with, set aside for keep_references(): called where the
  // device is not held alone, it resets them and keeps them for other evaluations (or shuts them
  // down). This evaluation never takes one of its own back (each round needs a process of its
  // own).
  void finish_reference(StartedWorker& reference);
  void keep_references();
  // How many pairs of workers for later rounds fit in memory next to the loaded pair and next to
  // the pairs other evaluations on the device have staged; sets that memory aside in
  // staging_memory_.
  // `rounds` counts the one the loaded pair is for.
  std::size_t rounds_to_stage(const StartedWorker& reference, const StartedWorker& candidate,
                              std::size_t rounds);
  // Starts and loads, all at once, the pairs of workers for timing rounds next_round + 1 .. (as
  // many of rounds - 1 as rounds_to_stage allows), while this evaluation does not hold the
  // device alone: switching rounds then starts no process. A verdict when the candidate cannot
  // be loaded in one of them.
  std::optional<Verdict> stage_rounds(const StartedWorker& reference,
                                      const StartedWorker& candidate, const std::string& build_key,
                                      std::size_t rounds, std::size_t next_round = 1);
  // --timing-rounds auto: the next `count` pairs of workers for rounds from `round` on, started
  // and loaded with the device given back, then their first call and timing inputs under the
  // shared holds (a fresh process's lazy initialisation is not timed); at least one pair (a
  // restart of the current one where none could be staged). A verdict when the candidate fails.
  std::optional<Verdict> prepare_more_rounds(StartedWorker& reference, StartedWorker& candidate,
                                             const std::string& build_key, std::size_t round,
                                             std::size_t count, const TimingConfig& config,
                                             DeviceHolds& holds);
  // The verdict for a candidate that failed to load (rethrows what is the task's fault).
  Verdict candidate_load_failure(std::exception_ptr error, std::size_t round);
  std::filesystem::path worker_log(Side side, std::size_t round) const;
  // Replaces both workers with fresh processes for the next timing round, where no staged pair
  // is left; a verdict when the candidate cannot be loaded again.
  std::optional<Verdict> restart_workers(StartedWorker& reference, StartedWorker& candidate,
                                         const std::string& build_key, std::size_t round);
  // Starts and loads the candidate's worker while the reference's loads, then records what the
  // imports replaced; a verdict when the candidate cannot be loaded. Round 0 is the first load.
  std::optional<Verdict> load_candidate(StartedWorker& reference,
                                        std::future<void>& reference_future,
                                        StartedWorker& candidate, const std::string& build_key,
                                        std::size_t round);
  void shut_down_retired();

  // --- evaluation_rounds.cpp: the timing rounds.
  // Times every round (under place.exclusive, given back while an adaptive round's next workers
  // load); a verdict when the candidate failed.
  std::optional<Verdict> time_rounds(StartedWorker& reference, StartedWorker& candidate,
                                     const std::string& build_key, const TimingConfig& config,
                                     TimingPlace& place, TimingRounds& rounds);
  // The share of the timing budget round `round` may use.
  double round_budget(const TimingRounds& rounds, std::size_t round) const;
  // The workers of round `round` > 0 in place of the current ones: a staged pair, or fresh ones;
  // a verdict when the candidate cannot be loaded again.
  std::optional<Verdict> next_round_workers(StartedWorker& reference, StartedWorker& candidate,
                                            const std::string& build_key, std::size_t round,
                                            const TimingConfig& config, TimingPlace& place,
                                            TimingRounds& rounds);
  // --timing-rounds auto: how many more rounds to time after those done (recorded in
  // rounds.decisions).
  std::size_t decide_more_rounds(TimingRounds& rounds) const;
  // The rounds joined into one outcome, whose interval covers what a rerun would measure.
  TimingOutcome join_rounds(TimingRounds& rounds) const;
  // One timing round with guard checks; nullopt (and verdict_ set) when the candidate failed.
  std::optional<TimingOutcome> time_round(WorkerClient& reference, WorkerClient& candidate,
                                          const TimingConfig& config, const GpuClock* clock,
                                          std::size_t round, std::size_t rounds);

  // --- evaluation_calibration.cpp: the calibration and the device's bandwidth.
  // Whether the candidate's first worker times the task's model before the candidate loads.
  bool wants_calibration() const;
  // The task's model in the candidate's worker (no candidate code there yet) against the
  // reference's worker: the ratio of the two processes' offsets. Never fails the evaluation: a
  // calibration that cannot be made is recorded in details.calibration and left out.
  void calibrate(StartedWorker& reference, StartedWorker& candidate);
  // Divides the speedup by the calibration's ratio, where one was measured on the same clock.
  void apply_calibration(TimingOutcome& timing);
  // The device's memory bandwidth (GB/s), measured by the reference's worker and cached per
  // device; null when it cannot be measured.
  // `again`: measure even where a value is cached (a CPU's, before a flag rests on it).
  // It also sets matmul_tflops_, the device's matmul throughput per precision (the same cache).
  std::optional<double> bandwidth_gbs(WorkerClient& reference, const std::string& device_id,
                                      bool again = false);
  // The reference's arithmetic per call (details.flops), with the matmul roof it is held to.
  void record_flops();
  // The device's residency lock (evaluation.cpp), held while this evaluation's workers may run:
  // shared, or exclusive for an evaluation that runs alone.
  FileLock hold_residency();
  // On a GPU, waits for admission_ (evaluation_workers.cpp): room in the device's free memory
  // for what this task's workers were seen to take (phases.admission_wait_s, admission_bytes).
  void admit_to_device();
  // The recipe of this evaluation's ready workers (ready_recipe_), and their makers started, where
  // the engine keeps ready workers for its device.
  void prepare_ready_workers();
  // Keeps the reference's device memory from a reply's "memory" (its load's, or the timing
  // inputs' after the trials) as its task's footprint, where it is the most seen.
  void remember_footprint(const nlohmann::json& reply);

  LocalEvaluator::Shared& shared_;
  std::shared_future<const Toolchain*> toolchain_;
  std::optional<Toolchain> job_toolchain_;  // build_for_host: the evaluating host's
  const EvalRequest& request_;
  const EvalOptions& options_;
  const bool alone_;
  std::string device_;
  std::string task_digest_;  // SHA-256 of the task's text: names its footprint on a device
  // The UUID of the evaluation's GPU, named once in run(); empty on the CPU or where it cannot
  // be named.
  std::optional<std::string> gpu_uuid_;
  SeedPlan seeds_;
  // The workers' CPU by role and operation, reported as they are shut down (phases.worker_cpu_s).
  std::shared_ptr<WorkerCpuLedger> cpu_ledger_ = std::make_shared<WorkerCpuLedger>();
  std::filesystem::path workdir_;
  std::size_t workers_started_ = 0;  // names the workers' private directories
  nlohmann::json reference_flops_;   // {precision: flops} of one reference call, or null
  nlohmann::json matmul_tflops_;     // {precision: TFLOP/s} of the device, or null
  Verdict verdict_;
  Findings findings_;
  std::vector<std::string> own_kernels_;
  bool uses_extension_ = false;
  std::deque<WorkerPair> staged_;  // for the next rounds in order, loaded and stopped
  // The input sets the timing pair's warm-up took under the shared hold (prewarm_timing); 0
  // when the pair was not warmed before the exclusive hold.
  std::size_t prewarmed_sets_ = 0;
  std::vector<WorkerPair> retired_;  // rounds done, stopped until the device is given back
  // The device memory (or RAM) the staged pairs were granted; given back once they are gone.
  MemoryReservation staging_memory_;
  // This evaluation's place on its GPU (Shared::admission); empty on the CPU.
  DeviceAdmission::Ticket admission_;
  // How this evaluation's workers are made ahead (Shared::ready); empty: it forks its own.
  std::optional<ReadyRecipe> ready_recipe_;
  std::size_t ready_taken_ = 0;
  // Shared::references's key for this evaluation's references (empty: none kept), the ones it is
  // done with, and how many it took from there.
  std::string reference_key_;
  std::vector<StartedWorker> finished_references_;
  std::set<std::uint64_t> used_references_;  // KeptReference::id of each it started or took
  std::size_t kept_taken_ = 0;
  // The candidate failed to load: an awaiting reference stops waiting (await_reference).
  std::atomic<bool> reference_unneeded_{false};
  std::mutex start_mutex_;  // start_worker, from the evaluation's thread or a loading one
  std::optional<TimingOutcome> calibration_;
  nlohmann::json phases_ = nlohmann::json::object();
  // This evaluation's own thread's CPU seconds in a phase since `since_s` (thread_cpu_s()), into
  // phases.orchestrator_cpu_s: what the orchestrator (serve, bench, a queue worker) spends per
  // verdict driving the workers, reading and comparing their outputs, and on the statistics;
  // helper threads are not counted.
  static double thread_cpu_s();
  void note_cpu(const char* phase, double since_s);
  // The CPU seconds of every worker's start and load by side (loads run at once: a lock).
  std::mutex load_cpu_mutex_;
  std::map<std::string, double> load_cpu_s_;
  // Where the loads' time went, summed by side (phases.load_parts): starting the process, the
  // load request as this process waited for it, and the worker's parts of it.
  std::map<std::string, std::map<std::string, double>> load_parts_;
};

}  // namespace cudal1
