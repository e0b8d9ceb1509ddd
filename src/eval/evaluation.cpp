// One evaluation: check the sources, build the candidate (cached), start a reference worker and a
// candidate worker, take the device, run correctness trials and the timing protocol, and turn
// whatever happened into a verdict. The candidate only ever runs in its own worker process.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <regex>
#include <thread>

#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/correctness.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/device_lock.hpp"
#include "cudal1/eval/memory_ledger.hpp"
#include "cudal1/eval/profile.hpp"
#include "cudal1/eval/seeds.hpp"
#include "cudal1/eval/worker_sandbox.hpp"
#include "cudal1/task/cuda_usage.hpp"
#include "cudal1/task/source_check.hpp"
#include "engine_state.hpp"

namespace cudal1 {
namespace {

// A CUDA or PyTorch out-of-memory error, as a worker reports it ("CUDA error: out of memory",
// "CUDA out of memory. Tried to allocate ...", torch.OutOfMemoryError).
bool is_out_of_memory(const std::string& message) {
  std::string lower;
  for (char c : message) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("out of memory") != std::string::npos ||
         lower.find("outofmemoryerror") != std::string::npos;
}

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::uint64_t physical_memory_bytes() {
  return static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// What can be allocated without swapping (MemAvailable), or the physical memory where unknown.
double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<double>(physical_memory_bytes());
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// "cpu" | "cuda" | "cuda:N" -> "cpu" or "cuda:N"; "auto" stays "auto" until the toolchain is known.
std::string parse_device(const std::string& requested) {
  if (requested == "cpu" || requested == "auto") return requested;
  static const std::regex kCuda("cuda(:([0-9]+))?");
  std::smatch match;
  if (!std::regex_match(requested, match, kCuda)) {
    throw InputError(
        fmt::format("--device '{}' is not understood: use auto, cpu, cuda or cuda:N", requested));
  }
  return match[2].matched ? "cuda:" + match[2].str() : "cuda:0";
}

// Resolves "auto" and checks that a requested GPU is usable by the worker's PyTorch.
std::string resolve_device(const std::string& parsed, const Toolchain& toolchain) {
  if (parsed == "auto") return toolchain.cuda_available ? "cuda:0" : "cpu";
  if (parsed != "cpu" && !toolchain.cuda_available) {
    throw InputError(fmt::format(
        "--device {} was requested but PyTorch ({}) sees no CUDA device; use --device cpu", parsed,
        toolchain.info.value("torch", "?")));
  }
  return parsed;
}

struct BuildOutcome {
  BuildRecord record;
  bool cached = false;
  bool skipped = false;  // nothing to build: no build process was started
  std::string key;
};

// Whether a candidate's text may build an extension at import (PyTorch's cpp_extension: load,
// load_inline, setuptools' CUDAExtension). A candidate without these words builds nothing there,
// and on the CPU its build step would only import it once more in a process of its own
// (PyTorch's import, seconds of a CPU, on the critical path). One that builds anyway (names hidden
// from this check) builds in its own worker's load: with that load's time limit, into a private
// directory, reported as rebuilt_on_load, never cached.
bool may_build_extension(const SourceInfo& candidate) {
  return candidate.uses_load_inline || candidate.text.find("cpp_extension") != std::string::npos ||
         candidate.text.find("load_inline") != std::string::npos;
}

// The trials are not timed: they share the device with other evaluations' trials, never with
// a timing phase. Each call on the device (the first calls, then every trial) takes the shared
// hold and gives it back, so a timing phase waiting for the device passes between the trials
// of a long evaluation; the trials' inputs are made on the host and their outputs compared
// outside the holds. Nothing of theirs runs on the device outside a hold, so nothing of theirs
// disturbs another evaluation's timing. Where both workers have a device gate, they take the
// hold themselves, only while their CUDA calls use the device: a compilation inside forward
// does not keep timing phases waiting.
class SharedHolds : public DeviceHolds {
 public:
  SharedHolds(std::function<FileLock()> acquire, nlohmann::json worker_hold, nlohmann::json& phases)
      : acquire_(std::move(acquire)), worker_hold_(std::move(worker_hold)), phases_(phases) {
    // Holds recorded before (the calibration's, before the candidate loaded).
    for (const auto& span : phases_.value("device_shared", nlohmann::json::array()))
      spans_.emplace_back(span.at(0).get<double>(), span.at(1).get<double>());
    wait_s_ = phases_.value("device_shared_wait_s", 0.0);
  }
  ~SharedHolds() override { give_back(); }
  void take() override {
    if (!worker_hold_.is_null()) return;
    const auto start = Clock::now();
    lock_.emplace(acquire_());
    const double waited = seconds_since(start);
    wait_s_ += waited;
    trusted_wait_s_ += waited;
    from_ = unix_now();
  }
  void give_back() override {
    if (!lock_) return;
    const double to = unix_now();
    lock_.reset();
    add(from_, to);
  }
  nlohmann::json worker_hold() const override { return worker_hold_; }
  void reported(const wire::Message& candidate_reply,
                const wire::Message& reference_reply) override {
    for (const auto* reply : {&candidate_reply, &reference_reply}) {
      wait_s_ += reply->header.value("hold_wait_s", 0.0);
      for (const auto& span : reply->header.value("holds", nlohmann::json::array()))
        add(span.at(0).get<double>(), span.at(1).get<double>());
    }
    // Both workers wait for the same hold; only the reference's account is trusted.
    trusted_wait_s_ += std::max(0.0, reference_reply.header.value("hold_wait_s", 0.0));
  }
  double waited_s() const override { return trusted_wait_s_; }

 private:
  // The union of the holds: the two workers' overlap.
  void add(double from, double to) {
    spans_.emplace_back(from, to);
    std::sort(spans_.begin(), spans_.end());
    std::vector<std::pair<double, double>> merged;
    for (const auto& span : spans_) {
      if (!merged.empty() && span.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, span.second);
      } else {
        merged.push_back(span);
      }
    }
    spans_ = std::move(merged);
    double held_s = 0;
    nlohmann::json spans = nlohmann::json::array();
    for (const auto& [a, b] : spans_) {
      spans.push_back({a, b});
      held_s += b - a;
    }
    phases_["device_shared"] = std::move(spans);
    phases_["device_shared_s"] = held_s;
    phases_["device_shared_wait_s"] = wait_s_;
  }
  std::function<FileLock()> acquire_;
  nlohmann::json worker_hold_;
  nlohmann::json& phases_;
  std::optional<FileLock> lock_;
  std::vector<std::pair<double, double>> spans_;  // [from, to] per hold, Unix seconds
  double from_ = 0, wait_s_ = 0;
  double trusted_wait_s_ = 0;  // this process's waits and the reference worker's
};

// The device held alone until destroyed. When (Unix seconds) goes to phases[held_key] as
// [from, to]: the scheduler's exclusivity, checkable; the wait to phases[wait_key].
class ExclusiveHold {
 public:
  ExclusiveHold(const std::filesystem::path& lock_dir, const std::string& device_id,
                nlohmann::json& phases, const char* wait_key, const char* held_key)
      : phases_(phases), held_key_(held_key) {
    const auto start = Clock::now();
    lock_.emplace(lock_device(lock_dir, device_id, DeviceUse::kExclusive));
    phases_[wait_key] = phases_.value(wait_key, 0.0) + seconds_since(start);
    from_ = unix_now();
  }
  // phases[held_key] is [from, to], or a list of them when the device was held more than once
  // (timing rounds give it back while their next workers load); phases[held_key + "_s"] sums them.
  ~ExclusiveHold() {
    const double to = unix_now();
    lock_.reset();
    nlohmann::json& slot = phases_[held_key_];
    const nlohmann::json span = {from_, to};
    if (slot.is_array() && !slot.empty() && slot[0].is_number()) {
      slot = nlohmann::json::array({slot, span});
    } else if (slot.is_array() && !slot.empty()) {
      slot.push_back(span);
    } else {
      slot = span;
    }
    const std::string sum_key = std::string(held_key_) + "_s";
    phases_[sum_key] = phases_.value(sum_key, 0.0) + (to - from_);
  }
  ExclusiveHold(const ExclusiveHold&) = delete;
  ExclusiveHold& operator=(const ExclusiveHold&) = delete;

 private:
  nlohmann::json& phases_;
  const char* held_key_;
  std::optional<FileLock> lock_;
  double from_ = 0;
};

class Evaluation {
 public:
  Evaluation(LocalEvaluator::Shared& shared, const EvalRequest& request)
      : shared_(shared), request_(request), options_(request.options) {}

  Verdict run();

 private:
  void report(const std::string& message) const {
    if (options_.progress) options_.progress(message);
  }
  // The toolchain probe runs while the sources are checked and the reference starts.
  const Toolchain& toolchain() { return *toolchain_.get(); }
  std::map<std::string, std::string> worker_environment(bool builds);
  // A worker's process, contained per the engine's sandbox policy (worker_sandbox.hpp): the
  // containment's role, program, device, private directory and limits are filled in here.
  // `device` becomes the name of the device inside.
  WorkerSpec contained_worker(WorkerContainment containment, const std::filesystem::path& log,
                              std::string& device);
  // RLIMIT_CPU of a worker's processes: a backstop past its time limits, with every core busy.
  static std::uint64_t cpu_seconds_for(double wall_seconds) {
    return static_cast<std::uint64_t>(std::ceil(wall_seconds)) *
           std::max(1u, std::thread::hardware_concurrency());
  }
  std::uint64_t memory_limit() const {
    return options_.limits.memory_bytes > 0 ? options_.limits.memory_bytes
                                            : physical_memory_bytes() / 2;
  }
  BuildOutcome ensure_built(const SourceInfo& candidate);
  struct StartedWorker {
    std::unique_ptr<WorkerClient> client;
    nlohmann::json load_reply;  // the load request until load() replaces it with the reply
  };
  struct WorkerPair {
    StartedWorker reference;
    StartedWorker candidate;
  };
  // Spawns the process (on this thread: see WorkerClient::start); load() then sends the model.
  // Round k > 0 logs to "<side>-round<k+1>.log".
  StartedWorker start_worker(Side side, const std::string& build_key, std::size_t round = 0);
  void load(StartedWorker& worker, Side side);
  Verdict build_and_measure(const SourceInfo& candidate);
  Verdict candidate_failure(Status status, const std::string& error, const std::string& log);
  Verdict correctness_and_timing(StartedWorker& reference, StartedWorker& candidate,
                                 const std::string& build_key);
  // One timing round with guard checks; nullopt (and verdict_ set) when the candidate failed.
  std::optional<TimingOutcome> time_round(WorkerClient& reference, WorkerClient& candidate,
                                          const TimingConfig& config, const GpuClock* clock,
                                          std::size_t round, std::size_t rounds);
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
  nlohmann::json device_description(const nlohmann::json& load_reply, const GpuClock* clock) const;
  // Whether the candidate's first worker times the task's model before the candidate loads.
  bool wants_calibration() const {
    if (options_.timing.rounds > 1) return false;  // rounds average the offsets instead
    return options_.timing.calibration == "on" ||
           (options_.timing.calibration == "auto" && device_ != "cpu");
  }
  // The task's model in the candidate's worker (no candidate code there yet) against the
  // reference's worker: the ratio of the two processes' offsets. Never fails the evaluation: a
  // calibration that cannot be made is recorded in details.calibration and left out.
  void calibrate(StartedWorker& reference, StartedWorker& candidate);
  // Divides the speedup by the calibration's ratio, where one was measured on the same clock.
  void apply_calibration(TimingOutcome& timing);

  // The device's memory bandwidth (GB/s), measured by the reference's worker and cached per
  // device; null when it cannot be measured.
  // `again`: measure even where a value is cached (a CPU's, before a flag rests on it).
  std::optional<double> bandwidth_gbs(WorkerClient& reference, const std::string& device_id,
                                      bool again = false);

  LocalEvaluator::Shared& shared_;
  std::shared_future<const Toolchain*> toolchain_;
  const EvalRequest& request_;
  const EvalOptions& options_;
  std::string device_;
  SeedPlan seeds_;
  std::filesystem::path workdir_;
  std::size_t workers_started_ = 0;  // names the workers' private directories
  Verdict verdict_;
  Findings findings_;
  std::vector<std::string> own_kernels_;
  bool uses_extension_ = false;
  std::deque<WorkerPair> staged_;    // for the next rounds in order, loaded and stopped
  std::vector<WorkerPair> retired_;  // rounds done, stopped until the device is given back
  void shut_down_retired() {
    for (auto& pair : retired_) {
      pair.reference.client->shutdown();
      pair.candidate.client->shutdown();
    }
    retired_.clear();
  }
  // The device memory (or RAM) the staged pairs were granted; given back once they are gone.
  MemoryReservation staging_memory_;
  std::optional<TimingOutcome> calibration_;
  nlohmann::json phases_ = nlohmann::json::object();
};

std::map<std::string, std::string> Evaluation::worker_environment(bool builds) {
  std::map<std::string, std::string> env = {{"PYTHONDONTWRITEBYTECODE", "1"},
                                            {"PYTHONUNBUFFERED", "1"}};
  // Builds target the GPUs that are here, whether or not the build process can see them.
  if (builds && !std::getenv("TORCH_CUDA_ARCH_LIST")) {
    const std::string arch = toolchain().cuda_arch_list();
    if (!arch.empty()) env["TORCH_CUDA_ARCH_LIST"] = arch;
  }
  if (device_ == "cpu") {
    // Steady-state host allocation, as PyTorch's caching allocator gives on a GPU: without it
    // glibc returns large blocks to the kernel and each timed call pays page faults that depend
    // on allocation history rather than on the code being timed.
    if (!std::getenv("GLIBC_TUNABLES")) {
      env["GLIBC_TUNABLES"] =
          "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296";
    }
  }
  // OpenMP threads sleep as soon as a parallel region ends, on every device: spinning, they
  // would take the cores the timed side is using, and the CPU ticks the correctness trials
  // count against threads still busy after forward returned (background work) would include
  // the spin after the worker's own host-side work (a digest of an unaligned output on a GPU).
  if (!std::getenv("OMP_WAIT_POLICY")) env["OMP_WAIT_POLICY"] = "PASSIVE";
  return env;
}

WorkerSpec Evaluation::contained_worker(WorkerContainment containment,
                                        const std::filesystem::path& log, std::string& device) {
  containment.program = shared_.config.worker;
  containment.device = device_;
  containment.lock_dir = shared_.config.lock_dir;
  containment.environment = worker_environment(containment.role != "reference");
  containment.private_dir = workdir_ / fmt::format("{}-{}", containment.role, ++workers_started_);
  containment.memory_bytes = memory_limit();
  const ContainedCommand contained = contain_worker(containment, shared_.config.sandbox);
  if (!verdict_.details.contains("sandbox")) verdict_.details["sandbox"] = contained.description;
  device = contained.worker_device;
  WorkerSpec spec;
  spec.name = containment.role;
  spec.program = shared_.config.worker;
  spec.environment = contained.environment;
  spec.log_file = log;
  spec.memory_limit_bytes = memory_limit();
  spec.cpu_limit_seconds = static_cast<double>(containment.cpu_seconds);
  spec.cgroup = contained.cgroup;
  spec.argv = contained.argv;
  spec.inherit_environment = false;
  spec.limits = contained.limits;
  spec.working_directory = contained.working_directory;
  spec.sandboxed = contained.sandboxed;
  return spec;
}

BuildOutcome Evaluation::ensure_built(const SourceInfo& candidate) {
  BuildOutcome outcome;
  // A build inside a sandbox sees another machine than one outside it (no $HOME, no network):
  // their outcomes are kept apart.
  const bool sandboxed =
      shared_.config.sandbox != SandboxPolicy::kOff && SandboxSupport::probe().available();
  outcome.key =
      shared_.cache.key(candidate.text, toolchain().fingerprint + (sandboxed ? "|sandboxed" : ""));
  // On a GPU the build step stays for every candidate: without it a torch.compile baseline's
  // later timing rounds saw kernels outside its timed calls (bench.gpu_baselines flagged
  // background_work in 2 of 3 runs on an H100, 0 of 3 with the build step; cause not found).
  if (device_ == "cpu" && !may_build_extension(candidate)) {
    outcome.record.ok = true;
    outcome.skipped = true;
    return outcome;
  }
  if (auto record = shared_.cache.lookup(outcome.key)) {
    outcome.record = *record;
    outcome.cached = true;
    return outcome;
  }
  shared_.build_slots.acquire();
  struct Release {
    std::counting_semaphore<4096>& slots;
    ~Release() { slots.release(); }
  } release{shared_.build_slots};
  FileLock lock = shared_.cache.lock(outcome.key);
  if (auto record = shared_.cache.lookup(outcome.key)) {  // built by someone else meanwhile
    outcome.record = *record;
    outcome.cached = true;
    return outcome;
  }
  report("building the candidate");
  const auto start = Clock::now();
  WorkerContainment build;
  build.role = "build";
  build.inputs = {request_.candidate};
  build.extensions_dir = shared_.cache.extensions_dir(outcome.key);
  build.extensions_writable = true;
  build.cpu_seconds = cpu_seconds_for(options_.limits.build_s);
  std::string device = device_;
  WorkerSpec spec = contained_worker(std::move(build), workdir_ / "build.log", device);
  // Builds (nvcc, ninja: most of a bench's CPU time) yield the CPU to the workers: a timing
  // phase's host side (each sample's round trip, the window clock) must not wait for a compiler.
  spec.nice = 10;
  auto worker = WorkerClient::start(spec);
  try {
    worker->call({{"op", "load"},
                  {"role", "build"},
                  {"candidate", std::filesystem::absolute(request_.candidate)}},
                 after(options_.limits.build_s));
    outcome.record.ok = true;
  } catch (const WorkerError& e) {
    outcome.record.error = first_line(e.what());
    outcome.record.log = trim_log(e.traceback() + "\n" + worker->log_tail());
  } catch (const WorkerFailure& e) {
    // Not cached: a time-out or crash of the build may not happen again.
    outcome.record.error = fmt::format("building the candidate failed: {}", e.what());
    outcome.record.log = worker->log_tail();
    outcome.record.seconds = seconds_since(start);
    return outcome;
  }
  worker->shutdown();
  outcome.record.seconds = seconds_since(start);
  shared_.cache.store(outcome.key, outcome.record);
  return outcome;
}

Evaluation::StartedWorker Evaluation::start_worker(Side side, const std::string& build_key,
                                                   std::size_t round) {
  const bool is_candidate = side == Side::kCandidate;
  WorkerContainment containment;
  containment.role = is_candidate ? "candidate" : "reference";
  containment.inputs = {request_.task};
  if (is_candidate) {
    containment.inputs.push_back(request_.candidate);
    containment.extensions_dir = shared_.cache.extensions_dir(build_key);
  }
  containment.cpu_seconds = cpu_seconds_for(options_.limits.load_s + options_.limits.correctness_s +
                                            options_.timing.budget_s * 4 + 600);
  std::string device = device_;
  WorkerSpec spec = contained_worker(containment, worker_log(side, round), device);
  nlohmann::json load = {{"op", "load"},
                         {"role", containment.role},
                         {"task", std::filesystem::absolute(request_.task)},
                         {"device", device},
                         {"init_seed", seeds_.init},
                         {"trace_activity", options_.trace_activity}};
  if (const char* gate = std::getenv("CUDAL1_DEVICE_GATE"); gate && std::string(gate) == "0")
    load["device_gate"] = false;
  if (is_candidate) {
    load["candidate"] = std::filesystem::absolute(request_.candidate);
    load["memory_fraction"] = options_.limits.gpu_memory_fraction;
    if (round == 0 && wants_calibration()) load["calibrate"] = true;
  }
  return {WorkerClient::start(spec), load};
}

std::filesystem::path Evaluation::worker_log(Side side, std::size_t round) const {
  const std::string name = side == Side::kCandidate ? "candidate" : "reference";
  return workdir_ / (round == 0 ? name + ".log" : fmt::format("{}-round{}.log", name, round + 1));
}

void Evaluation::load(StartedWorker& worker, Side side) {
  worker.load_reply =
      call_as(*worker.client, side, worker.load_reply, after(options_.limits.load_s)).header;
}

Verdict Evaluation::candidate_failure(Status status, const std::string& error,
                                      const std::string& log) {
  verdict_.status = status;
  verdict_.error = error;
  verdict_.log = trim_log(log);
  return verdict_;
}

nlohmann::json Evaluation::device_description(const nlohmann::json& load_reply,
                                              const GpuClock* clock) const {
  if (device_ == "cpu") return "cpu";
  nlohmann::json out = load_reply.value("device", nlohmann::json::object());
  const auto& timer = load_reply.value("timer", nlohmann::json::object());
  for (const char* key : {"uuid", "pci_bus_id"}) {
    if (timer.contains(key)) out[key] = timer[key];
  }
  out["index"] = device_;
  if (clock) out.update(clock->describe());
  return out;
}

Verdict Evaluation::run() {
  const auto start = Clock::now();
  seeds_ = SeedPlan::derive(options_.seed.value_or(SeedPlan::fresh_master()), options_.trials);
  verdict_.seeds = seeds_.to_json();
  toolchain_ = std::async(std::launch::async, [this] { return &shared_.toolchain(); }).share();

  report("checking the sources");
  const auto& worker = shared_.config.worker;
  const SourceInfo task = inspect_source(request_.task, "task", worker);
  require_task_format(task);
  const SourceInfo candidate = inspect_source(request_.candidate, "candidate", worker);
  require_candidate_format(candidate);
  if (const auto overrides = task_overrides(task, candidate); !overrides.empty()) {
    verdict_.add_flag(flag::kTaskOverride);
    verdict_.details["task_overrides"] = overrides;
  }
  if (const auto downcasts = precision_downcasts(task, candidate); !downcasts.empty()) {
    findings_.add(flag::kPrecisionDowncast,
                  fmt::format("the candidate's code uses {} and the task's does not",
                              fmt::join(downcasts, ", ")));
  }
  own_kernels_ = candidate.kernel_names;
  uses_extension_ = candidate.uses_load_inline;
  device_ = parse_device(options_.device);
  if (device_ == "auto") device_ = resolve_device(device_, toolchain());
  verdict_.device = device_ == "cpu" ? nlohmann::json("cpu") : nlohmann::json({{"index", device_}});
  verdict_.details["tolerance"] = options_.tolerance.to_json();
  workdir_ = make_private_directory(shared_.config.cache_dir / "work", "eval-");
  struct Cleanup {
    const std::filesystem::path& dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{workdir_, options_.keep_workdir};
  if (options_.keep_workdir) verdict_.details["workdir"] = workdir_.string();

  Verdict result;
  try {
    result = build_and_measure(candidate);
  } catch (const SideFailure& e) {
    if (e.side() == Side::kCandidate) throw;
    throw InputError(fmt::format("the task '{}' failed: {}\n{}", request_.task.string(), e.what(),
                                 e.error().traceback()),
                     InputError::Subject::kTask);
  } catch (const WorkerFailure& e) {
    // Candidate failures become verdicts where they happen; what reaches here is the reference's.
    throw InputError(
        fmt::format("the reference model of task '{}' could not run: {}\n{}",
                    request_.task.string(), e.what(), trim_log_file(workdir_ / "reference.log")),
        InputError::Subject::kTask);
  }
  if (result.status == Status::kCompileError || result.status == Status::kRuntimeError)
    result.error += cuda_call_hint(candidate, device_);
  phases_["total_s"] = seconds_since(start);
  result.details["phases"] = phases_;
  findings_.apply_to(result);
  if (options_.require_custom_kernel && result.has_flag(flag::kNoCustomKernel) &&
      result.status == Status::kOk) {
    result.status = Status::kRejected;
    result.error = "no kernel of the candidate's own ran and --require-custom-kernel was given";
  }
  result.finalize();
  // Where each side's time went, kept with the verdict (prompts and reports read it).
  if (result.candidate_ms || result.reference_ms) {
    const nlohmann::json as_json = result.to_json();
    nlohmann::json profile = nlohmann::json::object();
    for (const char* side : {"reference", "candidate"}) {
      if (auto p = profile_of(as_json, side)) profile[side] = p->to_json();
    }
    if (!profile.empty()) result.details["profile"] = std::move(profile);
  }
  return result;
}

Verdict Evaluation::build_and_measure(const SourceInfo& candidate) {
  // Nothing is built or started for CUDA code on the CPU: PyTorch's builder would fail deep
  // inside with an error that does not say why.
  if (auto why = cuda_build_on_cpu(candidate, device_, options_.device == "auto"))
    return candidate_failure(Status::kCompileError, *why, "");
  // The reference starts while the candidate builds.
  report("starting the reference and building the candidate");
  StartedWorker reference = start_worker(Side::kReference, "");
  auto reference_future =
      std::async(std::launch::async, [this, &reference] { load(reference, Side::kReference); });
  const auto probe_start = Clock::now();
  resolve_device(device_, toolchain());
  phases_["toolchain_wait_s"] = seconds_since(probe_start);
  phases_["toolchain_cached"] = toolchain().from_cache;
  const auto build_start = Clock::now();
  const BuildOutcome build = ensure_built(candidate);
  phases_["build_s"] = seconds_since(build_start);
  verdict_.details["build"] = {
      {"cached", build.cached}, {"seconds", build.record.seconds}, {"key", build.key}};
  if (build.skipped) verdict_.details["build"]["skipped"] = "no extension to build";
  if (!build.record.ok) {
    reference_future.wait();
    return candidate_failure(Status::kCompileError, build.record.error, build.record.log);
  }

  report("loading the models");
  const auto load_start = Clock::now();
  StartedWorker candidate_worker;
  if (auto failure = load_candidate(reference, reference_future, candidate_worker, build.key, 0))
    return *failure;
  // Extension libraries the candidate's worker built again although the build was cached (empty
  // unless the toolchain or the candidate's sources changed under the cache).
  verdict_.details["build"]["rebuilt_on_load"] =
      candidate_worker.load_reply.value("rebuilt_extensions", nlohmann::json::array());
  // The kernels of what the candidate built count as its own, with those its text names.
  const auto built = candidate_worker.load_reply.value("built_kernels", nlohmann::json::array());
  if (built.is_array() && !built.empty()) {
    verdict_.details["build"]["built_kernels"] = built;
    for (const auto& name : built) {
      if (name.is_string() && std::find(own_kernels_.begin(), own_kernels_.end(),
                                        name.get<std::string>()) == own_kernels_.end())
        own_kernels_.push_back(name.get<std::string>());
    }
  }
  if (auto failure = stage_rounds(reference, candidate_worker, build.key, options_.timing.rounds))
    return *failure;
  phases_["load_s"] = seconds_since(load_start);
  Verdict result = correctness_and_timing(reference, candidate_worker, build.key);
  reference.client->shutdown();
  candidate_worker.client->shutdown();
  for (auto& pair : staged_) {  // the pairs of rounds that did not run
    pair.reference.client->shutdown();
    pair.candidate.client->shutdown();
  }
  staged_.clear();
  shut_down_retired();
  staging_memory_.release();
  return result;
}

Verdict Evaluation::correctness_and_timing(StartedWorker& started, StartedWorker& candidate_started,
                                           const std::string& build_key) {
  WorkerClient& reference = *started.client;
  WorkerClient& candidate = *candidate_started.client;
  const nlohmann::json timer = started.load_reply.value("timer", nlohmann::json::object());
  const std::string device_id = device_ == "cpu" ? "cpu" : timer.value("uuid", device_);
  std::unique_ptr<GpuClock> clock;
  if (device_ != "cpu") {
    std::string why;
    clock = GpuClock::open(device_id, why);
    if (!clock) verdict_.details["clock_unavailable"] = why;
  }

  // Failures of the first calls and trials count as the trials' own.
  const auto correctness_deadline = after(options_.limits.correctness_s);
  const auto failure_in = [&](const std::exception_ptr& error, const char* phase) -> Verdict {
    try {
      std::rethrow_exception(error);
    } catch (const SideFailure& e) {
      if (e.side() == Side::kReference) throw;
      candidate.shutdown();  // before the device is released: a faulted context must be gone
      return candidate_failure(Status::kRuntimeError, first_line(e.what()),
                               e.error().traceback() + "\n" + candidate.log_tail());
    } catch (const WorkerFailure& e) {
      if (e.worker() != "candidate") throw;
      const auto status =
          e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
      const std::string what =
          e.kind() == WorkerFailure::Kind::kTimeout
              ? fmt::format("{} exceeded their time limit ({} s)", phase,
                            options_.limits.correctness_s)
              : fmt::format("the candidate's worker failed during {}: {}", phase, e.what());
      return candidate_failure(status, what, candidate.log_tail());
    }
  };
  const auto trial_failure = [&](const std::exception_ptr& error) {
    return failure_in(error, "correctness trials");
  };
  nlohmann::json worker_hold;  // null: this process holds the device around each call
  if (started.load_reply.value("gate", false) &&
      candidate_started.load_reply.value("gate", false)) {
    const auto lock_path = device_lock_path(shared_.config.lock_dir, device_id);
    worker_hold = {{"lock", lock_path.string()},
                   {"turnstile", device_turnstile_path(lock_path).string()},
                   {"idle_ms", 250}};
  } else if (device_ != "cpu") {
    verdict_.details["device_gate_unavailable"] = started.load_reply.value(
        "gate_unavailable", candidate_started.load_reply.value("gate_unavailable", ""));
  }
  phases_["device_gate"] = !worker_hold.is_null();
  SharedHolds shared_holds(
      [&] {
        report("waiting for the device (trials)");
        return lock_device(shared_.config.lock_dir, device_id, DeviceUse::kShared);
      },
      worker_hold, phases_);

  report("first calls");
  FirstCalls first_calls;
  try {
    first_calls = run_first_calls(reference, candidate, seeds_, shared_holds, correctness_deadline);
    phases_["first_call_s"] = first_calls.seconds;
  } catch (...) {
    return trial_failure(std::current_exception());
  }

  report("checking correctness");
  const auto correctness_start = Clock::now();
  CorrectnessOutcome correctness;
  try {
    correctness =
        run_correctness_trials(reference, candidate, seeds_, options_.tolerance, shared_holds,
                               correctness_deadline, first_calls.candidate_outputs);
  } catch (...) {
    return trial_failure(std::current_exception());
  }
  phases_["correctness_s"] = seconds_since(correctness_start);
  findings_.merge(correctness.findings);
  verdict_.correct = correctness.correct;
  verdict_.max_abs_error = correctness.max_abs_error;
  verdict_.max_rel_error = correctness.max_rel_error;
  verdict_.details["trials"] = correctness.trials;
  if (!correctness.correct) {
    verdict_.status = Status::kIncorrect;
    verdict_.error = correctness.problem;
    return verdict_;
  }

  // The first round's inputs are made before the device is held alone (under the trials' kind
  // of hold: they are not timed); the timing phase finds them ready.
  report("making the timing inputs");
  TimingConfig timing_config = options_.timing;
  try {
    call_both_on_device(candidate, reference, prepare_timing_request(timing_config, seeds_.timing),
                        shared_holds, correctness_deadline);
  } catch (...) {
    return failure_in(std::current_exception(), "the timing inputs' preparation");
  }

  report("waiting for the device (timing)");
  std::optional<ExclusiveHold> hold;
  hold.emplace(shared_.config.lock_dir, device_id, phases_, "device_wait_s", "device_held");

  report("timing");
  const auto timing_start = Clock::now();
  const std::optional<double> gbs = bandwidth_gbs(reference, device_id);
  timing_config.own_kernels = own_kernels_;
  if (device_ == "cpu") {
    timing_config.mode = "window";  // a steady clock around the call
    // Other work on the CPU moves single calls by more than a GPU's do.
    timing_config.unseen_limit = std::max(timing_config.unseen_limit, 2.0);
  }
  // --timing-rounds auto: one round, then more while a rerun's interval is wider than the
  // target. On a CPU one round (a fresh process costs seconds; the prior says how wide), and
  // with a calibration one (it corrects the first pair's offset, not a later pair's).
  const bool adaptive = options_.timing.rounds == 0;
  const RoundsPolicy& policy = options_.timing.auto_rounds;
  const std::size_t round_count =
      adaptive
          ? (device_ == "cpu" || calibration_ ? 1 : std::max<std::size_t>(1, policy.max_rounds))
          : options_.timing.rounds;
  // A precision or library choice made per process moves the candidate between processes.
  bool per_process_choice = findings_.has(flag::kPrecisionDowncast);
  // Rounds share the budget; what a round that converged early left is there for the next ones.
  // An adaptive first round keeps most of it (RoundsPolicy::first_share) for the rounds it may
  // ask for.
  const double even_share = options_.timing.budget_s / static_cast<double>(round_count);
  double budget_left = options_.timing.budget_s;
  std::vector<TimingOutcome> rounds;
  double restart_s = 0;
  std::size_t released = 0;  // times the device was given back while more workers loaded
  nlohmann::json decisions = nlohmann::json::array();
  TimingConfig later_config = timing_config;  // the adaptive rounds after the first
  later_config.max_warmup_wall_s = std::min(timing_config.max_warmup_wall_s, policy.later_warmup_s);
  later_config.min_warmup_s = std::min(timing_config.min_warmup_s, policy.later_warmup_s);
  later_config.noise.min_time_s = std::min(timing_config.noise.min_time_s, policy.later_min_time_s);
  for (std::size_t round = 0; round < round_count; ++round) {
    TimingConfig config = adaptive && round > 0 ? later_config : timing_config;
    if (adaptive) {
      config.budget_s = round == 0 && round_count > 1
                            ? policy.first_share * options_.timing.budget_s
                            : std::min(policy.later_budget_s, budget_left);
      if (round == 0 && round_count == 1) config.budget_s = options_.timing.budget_s;
    } else {
      config.budget_s =
          std::max(0.5 * even_share, budget_left / static_cast<double>(round_count - round));
    }
    if (round > 0) {
      const auto restart_start = Clock::now();
      if (staged_.empty()) {
        if (adaptive) {
          std::size_t want = decisions.back().value("more", std::size_t{1});
          hold.reset();  // other evaluations may time while these workers load
          ++released;
          if (auto failure = prepare_more_rounds(started, candidate_started, build_key, round, want,
                                                 config, shared_holds))
            return *failure;
          report("waiting for the device (timing)");
          hold.emplace(shared_.config.lock_dir, device_id, phases_, "device_wait_s", "device_held");
        } else if (auto failure = restart_workers(started, candidate_started, build_key, round)) {
          return *failure;
        }
      }
      if (!staged_.empty()) {
        report(fmt::format("timing round {}: the next pair of workers", round + 1));
        if (adaptive) {
          // Stopped now, shut down once the device is given back: a process's exit (its CUDA
          // context's teardown) takes a second or more and is device work.
          started.client->pause();
          candidate_started.client->pause();
          retired_.push_back({std::move(started), std::move(candidate_started)});
        } else {
          started.client->shutdown();
          candidate_started.client->shutdown();
        }
        started = std::move(staged_.front().reference);
        candidate_started = std::move(staged_.front().candidate);
        staged_.pop_front();
        started.client->resume();
        candidate_started.client->resume();
      }
      restart_s += seconds_since(restart_start);
      // Every round on the clock the first one chose.
      if (rounds.front().details.value("mode", "") == "window") config.mode = "window";
    }
    auto outcome = time_round(*started.client, *candidate_started.client, config, clock.get(),
                              round, adaptive ? 0 : round_count);
    if (!outcome) return verdict_;
    budget_left -= outcome->details.value("elapsed_s", config.budget_s);
    per_process_choice = per_process_choice || runs_library_chosen_kernels(*outcome);
    rounds.push_back(std::move(*outcome));
    if (!adaptive || round + 1 >= round_count) continue;
    const RerunInterval so_far = rerun_interval(rounds, policy.prior, per_process_choice);
    std::size_t more = more_rounds_wanted(so_far, rounds.size(), policy);
    // Each later round needs at least its sampling minimum and a warm-up.
    const double per_round = policy.later_min_time_s + policy.later_warmup_s;
    const auto affordable = static_cast<std::size_t>(std::max(0.0, budget_left / per_round));
    nlohmann::json decision = {{"after_round", rounds.size()},
                               {"half_width", so_far.half_width},
                               {"prior_sd", so_far.prior_sd},
                               {"between_sd", so_far.between_sd}};
    // On the window clock a call's time holds the host's, whose speed drifts over minutes more
    // than between processes (docs/evaluation.md, "How repeatable the speedup is"): rounds would
    // cost whole calls of host work and not narrow it. The prior's width stands.
    if (more > 0 && std::any_of(rounds.begin(), rounds.end(), [](const TimingOutcome& r) {
          return r.details.value("mode", "") != "queued";
        })) {
      decision["window_clock"] = true;
      more = 0;
    }
    if (more > affordable) decision["budget_cut"] = more - affordable;
    more = std::min(more, affordable);
    decision["more"] = more;
    decisions.push_back(decision);
    if (more == 0) break;
  }
  if (rounds.size() > 1 || (!adaptive && round_count > 1)) phases_["timing_restart_s"] = restart_s;
  if (released > 0) phases_["timing_released"] = released;
  // Rounds on both clocks are joined on the window clock alone (combine_rounds): so is the
  // interval.
  std::vector<TimingOutcome> joined_rounds;
  const auto on_window = [](const TimingOutcome& r) {
    return r.details.value("mode", "") == "window";
  };
  const bool any_window = std::any_of(rounds.begin(), rounds.end(), on_window);
  for (const auto& r : rounds) {
    if (!any_window || on_window(r)) joined_rounds.push_back(r);
  }
  const RerunInterval rerun = rerun_interval(joined_rounds, policy.prior, per_process_choice);
  TimingOutcome timing =
      combine_rounds(std::move(rounds), options_.timing.noise.max_noise,
                     options_.timing.final_resamples, seeds_.schedule ^ 0x5eedf00dULL);
  // The interval covers what a rerun would measure (docs/evaluation.md, "Intervals that cover a
  // rerun"); the samples' own interval stays in the details.
  timing.details["sampling_ci"] = {timing.ci.low, timing.ci.high};
  nlohmann::json rerun_record = rerun.to_json();
  rerun_record["per_process_choice"] = per_process_choice;
  rerun_record["adaptive"] = adaptive;
  if (adaptive) {
    rerun_record["target"] = policy.rerun_target;
    rerun_record["decisions"] = decisions;
  }
  if (std::isfinite(rerun.ci.low) && std::isfinite(rerun.ci.high)) {
    // Never narrower than the samples' own interval.
    timing.ci = {
        std::isfinite(timing.ci.low) ? std::min(rerun.ci.low, timing.ci.low) : rerun.ci.low,
        std::isfinite(timing.ci.high) ? std::max(rerun.ci.high, timing.ci.high) : rerun.ci.high};
  }
  timing.details["rerun"] = rerun_record;
  if (adaptive && timing.details.contains("rounds")) {
    // Rounds taken to average processes are judged by the interval they give, not each by its
    // own pairs: noisy when a rerun may still differ by more than the target.
    const bool settled = rerun.half_width <= policy.rerun_target;
    timing.converged = settled;
    timing.details["stop"] = settled ? "converged" : "rounds_disagree";
  }
  apply_calibration(timing);
  phases_["timing_s"] = seconds_since(timing_start);
  findings_.merge(timing.findings);

  verdict_.device = device_description(started.load_reply, clock.get());
  if (timing.details.contains("sm_clock_mhz") && verdict_.device.is_object()) {
    verdict_.device["sm_clock_mhz"] = timing.details["sm_clock_mhz"]["median"];
  }
  verdict_.status = Status::kOk;
  verdict_.speedup = timing.speedup;
  verdict_.speedup_ci = timing.ci;
  verdict_.reference_ms = timing.reference_median_ms;
  verdict_.candidate_ms = timing.candidate_median_ms;
  verdict_.samples = timing.reference_ms.size();
  verdict_.details["timing"] = timing.details;
  if (!timing.converged) verdict_.add_flag(flag::kNoisy);
  // The defenses on the joined timing (defenses.hpp): whose kernels ran, the speed of light.
  const VerdictMeasured measured{
      timing,
      static_cast<double>(correctness.output_bytes),
      gbs,
      [&] { return bandwidth_gbs(*started.client, device_id, /*again=*/true); },
      device_ == "cpu",
      own_kernels_,
      uses_extension_};
  DefenseContext defenses{DefensePhase::kVerdict, options_.timing, findings_, verdict_.details};
  defenses.verdict = &measured;
  run_defenses(defenses);
  return verdict_;
}

std::optional<TimingOutcome> Evaluation::time_round(WorkerClient& reference,
                                                    WorkerClient& candidate,
                                                    const TimingConfig& config,
                                                    const GpuClock* clock, std::size_t round,
                                                    std::size_t rounds) {
  const Tolerance tolerance = options_.tolerance;
  const std::string label = rounds > 1  ? fmt::format("timing round {}/{}", round + 1, rounds)
                            : round > 0 ? fmt::format("timing round {}", round + 1)
                                        : std::string("timing");
  // Round k replays from its own seeds, derived from the recorded ones.
  const std::uint64_t offset = 0x9e3779b97f4a7c15ULL * round;
  try {
    TimingOutcome outcome = measure_speedup(
        reference, candidate, config, seeds_.timing + offset, seeds_.schedule + offset, clock,
        [this, &label](const TimingProgress& p, double speedup) {
          report(fmt::format("{}: {} samples, speedup {:.3f}x, noise {:.2f}%", label, p.pairs,
                             speedup, 100 * p.relative_noise));
        },
        [tolerance](const wire::Message& c, const wire::Message& r) {
          return compare_sample_outputs(c, r, tolerance);
        });
    // Replacements made while being timed.
    const auto guard_deadline = after(options_.timing.call_timeout_s);
    add_guard_findings(
        findings_,
        call_as(candidate, Side::kCandidate, {{"op", "guards"}}, guard_deadline).header["guards"],
        call_as(reference, Side::kReference, {{"op", "guards"}}, guard_deadline).header["guards"],
        label);
    return outcome;
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    candidate.shutdown();
    candidate_failure(Status::kRuntimeError, first_line(e.what()),
                      e.error().traceback() + "\n" + candidate.log_tail());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    candidate_failure(status, fmt::format("the candidate failed while being timed: {}", e.what()),
                      candidate.log_tail());
  }
  return std::nullopt;
}

std::optional<Verdict> Evaluation::restart_workers(StartedWorker& reference,
                                                   StartedWorker& candidate,
                                                   const std::string& build_key,
                                                   std::size_t round) {
  report(fmt::format("timing round {}: starting fresh workers", round + 1));
  reference.client->shutdown();
  candidate.client->shutdown();
  reference = start_worker(Side::kReference, "");
  auto reference_future =
      std::async(std::launch::async, [this, &reference] { load(reference, Side::kReference); });
  return load_candidate(reference, reference_future, candidate, build_key, round);
}

std::optional<Verdict> Evaluation::load_candidate(StartedWorker& reference,
                                                  std::future<void>& reference_future,
                                                  StartedWorker& candidate,
                                                  const std::string& build_key, std::size_t round) {
  try {
    candidate = start_worker(Side::kCandidate, build_key, round);
    load(candidate, Side::kCandidate);
  } catch (...) {
    reference_future.wait();
    return candidate_load_failure(std::current_exception(), round);
  }
  reference_future.get();
  if (candidate.load_reply.value("calibrating", false)) {
    const auto start = Clock::now();
    calibrate(reference, candidate);
    phases_["calibration_s"] = seconds_since(start);
    try {
      candidate.load_reply = call_as(*candidate.client, Side::kCandidate,
                                     {{"op", "load_candidate"}}, after(options_.limits.load_s))
                                 .header;
    } catch (...) {
      return candidate_load_failure(std::current_exception(), round);
    }
  }
  add_guard_findings(findings_, candidate.load_reply.value("guards", nlohmann::json()),
                     reference.load_reply.value("guards", nlohmann::json()), "import");
  return std::nullopt;
}

Verdict Evaluation::candidate_load_failure(std::exception_ptr error, std::size_t round) {
  const auto log = worker_log(Side::kCandidate, round);
  const std::string what =
      round == 0 ? std::string("loading the candidate")
                 : fmt::format("loading the candidate again for timing round {}", round + 1);
  try {
    std::rethrow_exception(error);
  } catch (const SideFailure& e) {
    // The candidate's worker imports the task too; a task that fails there is the task's fault.
    if (e.error().status() == "task_error") throw SideFailure(Side::kReference, e.error());
    const auto status =
        e.error().status() == "compile_error" ? Status::kCompileError : Status::kRuntimeError;
    const std::string message = first_line(e.what());
    return candidate_failure(status, round == 0 ? message : fmt::format("{}: {}", what, message),
                             e.error().traceback() + "\n" + trim_log_file(log));
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    return candidate_failure(status, fmt::format("{}: {}", what, e.what()), trim_log_file(log));
  }
}

std::size_t Evaluation::rounds_to_stage(const StartedWorker& reference,
                                        const StartedWorker& candidate, std::size_t rounds) {
  if (rounds <= 1) return 0;
  double free_bytes = 0, pair_bytes = 0;
  std::string device_id = "cpu";
  if (device_ == "cpu") {
    free_bytes = available_memory_bytes();
    pair_bytes = static_cast<double>(reference.client->resident_bytes() +
                                     candidate.client->resident_bytes());
  } else {
    const auto& ours = reference.load_reply.value("memory", nlohmann::json::object());
    const auto& theirs = candidate.load_reply.value("memory", nlohmann::json::object());
    // The reference's numbers are trusted; the candidate's count for at least as much as the
    // reference's and at most its memory fraction. A context takes about a GiB of its own.
    constexpr double kContextBytes = 1024.0 * 1024 * 1024;
    const double total = ours.value("device_total", 0.0);
    const double reference_bytes = ours.value("device_reserved", 0.0);
    double candidate_bytes = std::max(reference_bytes, theirs.value("device_reserved", 0.0));
    const double fraction = options_.limits.gpu_memory_fraction;
    if (fraction > 0 && fraction < 1) candidate_bytes = std::min(candidate_bytes, fraction * total);
    // The reference measured before the candidate had necessarily loaded.
    free_bytes = ours.value("device_free", 0.0) - candidate_bytes - kContextBytes;
    pair_bytes = reference_bytes + candidate_bytes + 2 * kContextBytes;
    device_id =
        reference.load_reply.value("timer", nlohmann::json::object()).value("uuid", device_);
  }
  const std::size_t want = pairs_to_stage(rounds, free_bytes, pair_bytes);
  if (want == 0) return 0;
  staging_memory_.release();  // the grant of pairs staged before, all gone by now
  // Other evaluations on the device (a bench's, another process's) saw the same free memory:
  // what their staged pairs hold comes off the half this one may use.
  staging_memory_ = MemoryReservation::reserve(
      shared_.config.lock_dir, device_id, pair_bytes,
      [&](double others) { return pairs_to_stage(rounds, free_bytes - 2 * others, pair_bytes); });
  if (staging_memory_.blocks() < want)
    phases_["staging_limited"] = fmt::format(
        "{} of {} pairs: other evaluations' staged pairs hold {:.1f} GiB of this device",
        staging_memory_.blocks(), want, staging_memory_.others_bytes() / (1024.0 * 1024 * 1024));
  return staging_memory_.blocks();
}

std::optional<Verdict> Evaluation::stage_rounds(const StartedWorker& reference,
                                                const StartedWorker& candidate,
                                                const std::string& build_key, std::size_t rounds,
                                                std::size_t next_round) {
  const std::size_t count = rounds_to_stage(reference, candidate, rounds);
  if (rounds > 1) phases_["staged_rounds"] = phases_.value("staged_rounds", std::size_t{0}) + count;
  if (count == 0) return std::nullopt;

  report(fmt::format("starting {} more pairs of workers for the timing rounds", count));
  std::vector<WorkerPair> pairs(count);
  for (std::size_t k = 0; k < count; ++k) {
    pairs[k].reference = start_worker(Side::kReference, "", next_round + k);
    pairs[k].candidate = start_worker(Side::kCandidate, build_key, next_round + k);
  }
  std::vector<std::future<void>> loads;
  for (auto& pair : pairs) {
    loads.push_back(
        std::async(std::launch::async, [this, &pair] { load(pair.reference, Side::kReference); }));
    loads.push_back(
        std::async(std::launch::async, [this, &pair] { load(pair.candidate, Side::kCandidate); }));
  }
  for (auto& load : loads) load.wait();
  std::size_t usable = count;
  // The rounds from pair k on restart their workers in turn instead (the first failure says why).
  const auto stop_staging_at = [&](std::size_t k, const std::exception& e) {
    if (usable < count) return;
    phases_["staging_stopped"] =
        fmt::format("timing round {}: {}", next_round + k + 1, first_line(e.what()));
    usable = k;
  };
  for (std::size_t k = 0; k < count; ++k) {
    try {
      loads[2 * k + 1].get();
    } catch (const std::exception& e) {
      // Out of device memory with all pairs loading at once (the estimate is the reference's):
      // the candidate's round restarts instead, and running out of memory again then is its
      // verdict. Any other failure is its verdict now.
      if (device_ == "cpu" || !is_out_of_memory(e.what()))
        return candidate_load_failure(std::current_exception(), next_round + k);
      stop_staging_at(k, e);
      continue;
    } catch (...) {
      return candidate_load_failure(std::current_exception(), next_round + k);
    }
    try {
      loads[2 * k].get();
    } catch (const std::exception& e) {
      // Loaded once already; a reference that fails again on its restart is the task's failure.
      stop_staging_at(k, e);
    }
  }
  for (std::size_t k = 0; k < usable; ++k) {
    // Stopped until their round: an idle worker cannot run anything while another pair is timed.
    pairs[k].reference.client->pause();
    pairs[k].candidate.client->pause();
    add_guard_findings(findings_, pairs[k].candidate.load_reply.value("guards", nlohmann::json()),
                       pairs[k].reference.load_reply.value("guards", nlohmann::json()), "import");
    staged_.push_back(std::move(pairs[k]));
  }
  return std::nullopt;
}

std::optional<Verdict> Evaluation::prepare_more_rounds(
    StartedWorker& reference, StartedWorker& candidate, const std::string& build_key,
    std::size_t round, std::size_t count, const TimingConfig& config, DeviceHolds& holds) {
  shut_down_retired();  // their memory goes back before more pairs load
  if (auto failure = stage_rounds(reference, candidate, build_key, count + 1, round))
    return *failure;
  if (staged_.empty()) {
    // Nothing fits beside the loaded pair: this round replaces it.
    if (auto failure = restart_workers(reference, candidate, build_key, round)) return *failure;
    phases_["timing_restarted"] = phases_.value("timing_restarted", std::size_t{0}) + 1;
  }
  // A fresh process's first call pays for lazy initialisation, autotuning and module loading;
  // here it is untimed, under the shared holds as the trials' calls were.
  const auto deadline = after(options_.limits.correctness_s);
  const auto warm = [&](WorkerClient& ref, WorkerClient& cand, std::size_t k) {
    const std::uint64_t offset = 0x9e3779b97f4a7c15ULL * k;
    call_both_on_device(cand, ref, {{"op", "first_call"}, {"seed", seeds_.warm + offset}}, holds,
                        deadline);
    call_both_on_device(cand, ref, prepare_timing_request(config, seeds_.timing + offset), holds,
                        deadline);
  };
  report(fmt::format("timing round {}: first calls of the next workers", round + 1));
  try {
    if (staged_.empty()) {
      warm(*reference.client, *candidate.client, round);
    } else {
      std::size_t k = round;
      for (auto& pair : staged_) {
        pair.reference.client->resume();
        pair.candidate.client->resume();
        warm(*pair.reference.client, *pair.candidate.client, k++);
        pair.reference.client->pause();
        pair.candidate.client->pause();
      }
    }
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    return candidate_failure(Status::kRuntimeError,
                             fmt::format("timing round {}: {}", round + 1, first_line(e.what())),
                             e.error().traceback());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    return candidate_failure(
        status,
        fmt::format("timing round {}: the candidate's worker failed: {}", round + 1, e.what()), "");
  }
  return std::nullopt;
}

void Evaluation::calibrate(StartedWorker& reference, StartedWorker& candidate) {
  nlohmann::json& record = verdict_.details["calibration"];
  record = nlohmann::json::object();
  const nlohmann::json timer = reference.load_reply.value("timer", nlohmann::json::object());
  const std::string device_id = timer.value("uuid", device_);
  // Inputs of its own: the timing phase's pool stays unseen until the timing phase.
  const std::uint64_t seed = seeds_.timing ^ 0xca1b7a7e5eedULL;
  TimingConfig config = options_.timing;
  config.budget_s = std::min(1.0, config.budget_s);
  // Tighter than the timing phase's target: its noise adds to the speedup's.
  config.noise.max_noise = 0.5 * config.noise.max_noise;
  config.noise.min_time_s = 0.1;
  config.min_warmup_s = 0.02;
  config.max_warmup_wall_s = 0.1;
  config.spot_check_every = 0;  // the same trusted model on both sides
  config.unseen_pairs = 0;
  config.rounds = 1;
  const auto deadline = after(options_.limits.correctness_s);
  // Under the shared hold, as the trials' device work (nothing here is timed), taken here: the
  // candidate's worker has no gate before the candidate loads.
  SharedHolds holds(
      [&] {
        report("waiting for the device (calibration's first calls)");
        return lock_device(shared_.config.lock_dir, device_id, DeviceUse::kShared);
      },
      nullptr, phases_);
  try {
    report("calibration: warm calls of the task's model in the candidate's worker");
    holds.take();
    const double call_ms = call_as(*candidate.client, Side::kCandidate,
                                   {{"op", "first_call"}, {"seed", seed}, {"calls", 5}}, deadline)
                               .header.value("call_ms", 0.0);
    holds.give_back();
    record["call_ms"] = call_ms;
    if (options_.timing.calibration != "on" && !(call_ms < config.calibrate_below_ms)) {
      record["skipped"] = fmt::format(
          "a warm call of the task's model takes {:.3f} ms; calibrated under {} ms, where a "
          "process's offset is a visible part of the time",
          call_ms, config.calibrate_below_ms);
      return;
    }
    // The reference's worker calls a copy of the task's model, never the one its trials and
    // timing call (a model with state must not run ahead of the candidate's).
    holds.take();  // the copy is built on the device
    call_as(*reference.client, Side::kReference, {{"op", "calibration_model"}, {"use", true}},
            deadline);
    holds.give_back();
    // ... and takes its own back however the calibration ends (after the exclusive hold).
    struct PutBack {
      WorkerClient* reference;
      Clock::time_point deadline;
      ~PutBack() {
        try {
          call_as(*reference, Side::kReference, {{"op", "calibration_model"}, {"use", false}},
                  deadline);
        } catch (...) {  // a reference that fails here fails its next request too
        }
      }
    } put_back{reference.client.get(), deadline};
    call_both_on_device(*candidate.client, *reference.client, prepare_timing_request(config, seed),
                        holds, deadline);
    report("waiting for the device (calibration)");
    const ExclusiveHold hold(shared_.config.lock_dir, device_id, phases_,
                             "device_wait_calibration_s", "device_held_calibration");
    std::string why;
    const auto clock = GpuClock::open(device_id, why);
    TimingOutcome outcome = measure_speedup(
        *reference.client, *candidate.client, config, seed, seeds_.schedule ^ 0xca1bULL,
        clock.get(), [this](const TimingProgress& p, double ratio) {
          report(fmt::format("calibration: {} samples, ratio {:.3f}, noise {:.2f}%", p.pairs, ratio,
                             100 * p.relative_noise));
        });
    // The reference's time over the same model's in the candidate's process.
    record["ratio"] = outcome.speedup;
    record["ratio_ci"] = {outcome.ci.low, outcome.ci.high};
    record["converged"] = outcome.converged;
    record["pairs"] = outcome.reference_ms.size();
    record["mode"] = outcome.details.value("mode", "");
    record["reference_ms"] = {{"reference_worker", outcome.reference_median_ms},
                              {"candidate_worker", outcome.candidate_median_ms}};
    for (const char* key : {"warmup_s", "sampling_s", "elapsed_s", "stop", "sample_steps_ms"}) {
      if (outcome.details.contains(key)) record[key] = outcome.details[key];
    }
    if (outcome.speedup > 0 && std::isfinite(outcome.speedup)) calibration_ = std::move(outcome);
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    record["error"] = first_line(e.what());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    record["error"] = first_line(e.what());
  }
}

void Evaluation::apply_calibration(TimingOutcome& timing) {
  if (!calibration_) return;
  nlohmann::json& record = verdict_.details["calibration"];
  const TimingOutcome& cal = *calibration_;
  const std::string mode = timing.details.value("mode", "");
  if (cal.details.value("mode", "") != mode) {
    record["applied"] = false;
    record["why_not"] = fmt::format("calibrated on the {} clock, timed on the {} clock",
                                    cal.details.value("mode", ""), mode);
    return;
  }
  // speedup = (reference's time / candidate's time) / (reference's time / the task's model's
  // time in the candidate's process): each process's offset cancels. The interval joins both
  // relative half-widths (log scale) in quadrature.
  const double raw = timing.speedup;
  const double ratio = cal.speedup;
  const auto log_width = [](double a, double b) { return a > 0 && b > 0 ? std::log(a / b) : 0.0; };
  const double down = std::hypot(log_width(raw, timing.ci.low), log_width(cal.ci.high, ratio));
  const double up = std::hypot(log_width(timing.ci.high, raw), log_width(ratio, cal.ci.low));
  timing.details["uncalibrated_speedup"] = raw;
  timing.details["uncalibrated_speedup_ci"] = {timing.ci.low, timing.ci.high};
  timing.speedup = raw / ratio;
  timing.ci = {timing.speedup * std::exp(-down), timing.speedup * std::exp(up)};
  timing.relative_noise = relative_half_width(timing.ci, timing.speedup);
  timing.converged = timing.converged && cal.converged;
  timing.details["relative_noise"] = timing.relative_noise;
  record["applied"] = true;
}

std::optional<double> Evaluation::bandwidth_gbs(WorkerClient& reference,
                                                const std::string& device_id, bool again) {
  std::string safe_id = device_id;
  for (char& c : safe_id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  const auto dir = shared_.config.cache_dir / "bandwidth";
  // ".queued": measured on the queued clock (older files timed a window with host time in it).
  const auto file = dir / (safe_id + ".queued.json");
  std::optional<double> cached;
  {
    std::ifstream in(file);
    nlohmann::json stored;
    if (in && (in >> stored) && stored.is_object() && stored.contains("gbs"))
      cached = stored["gbs"].get<double>();
  }
  // A GPU's bandwidth is measured once. A CPU's moves with the other work on its memory bus: the
  // highest seen is kept (the floor must never be too high), and it is measured again only where
  // a flag would rest on it (the speed_of_light defense), not in every evaluation's exclusive hold,
  // where the measurement (allocating and first touching 512 MB) took about 2 s of a CPU's.
  if (cached && !(again && device_ == "cpu")) return cached;
  try {
    const auto reply = call_as(reference, Side::kReference, {{"op", "bandwidth"}},
                               after(options_.timing.call_timeout_s));
    const auto measured = reply.header.at("bandwidth").at("gbs").get<double>();
    const double best = std::max(measured, cached.value_or(0.0));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const auto tmp = file.string() + fmt::format(".{}", ::getpid());
    std::ofstream(tmp) << nlohmann::json{{"gbs", best}, {"last", reply.header["bandwidth"]}};
    std::filesystem::rename(tmp, file, ec);
    return best;
  } catch (const SideFailure& e) {
    verdict_.details["bandwidth_unavailable"] = std::string(e.what());
    return cached;
  }
}

}  // namespace

Verdict run_evaluation(LocalEvaluator::Shared& shared, const EvalRequest& request) {
  return Evaluation(shared, request).run();
}

}  // namespace cudal1
