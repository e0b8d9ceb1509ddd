// The workers' processes (environment, containment, limits) and the candidate's build: cached
// per source and toolchain, skipped on the CPU for a candidate that builds no extension.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {
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

}  // namespace

std::uint64_t Evaluation::cpu_seconds_for(double wall_seconds) {
  return static_cast<std::uint64_t>(std::ceil(wall_seconds)) * usable_cores();
}

std::uint64_t Evaluation::memory_limit() const {
  return options_.limits.memory_bytes > 0 ? options_.limits.memory_bytes
                                          : physical_memory_bytes() / 2;
}

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
  // Fewer hardware queues per context: every live context's queues make each new context
  // dearer, and under load the contexts are what limit the rewards (TimingConfig).
  if (device_ != "cpu" && options_.timing.cuda_connections > 0)
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = std::to_string(options_.timing.cuda_connections);
  // OpenMP threads sleep as soon as a parallel region ends, on every device: spinning, they
  // would take the cores the timed side is using, and the CPU ticks the correctness trials
  // count against threads still busy after forward returned (background work) would include
  // the spin after the worker's own host-side work (a digest of an unaligned output on a GPU).
  if (!std::getenv("OMP_WAIT_POLICY")) env["OMP_WAIT_POLICY"] = "PASSIVE";
  // Every role alike (one zygote for all): only a build compiles, but a load may rebuild.
  if (shared_.cuda_headers == CudaHeaders::kLight) env["CUDAL1_CUDA_HEADERS"] = "light";
  return env;
}

void Evaluation::complete_containment(WorkerContainment& containment) {
  containment.program = shared_.config.worker;
  containment.device = device_;
  containment.lock_dir = shared_.config.lock_dir;
  // A ready worker has no role yet: a candidate's builds get theirs with its load.
  const bool builds = containment.role != "reference" && containment.role != "ready";
  containment.environment = worker_environment(builds);
  containment.private_dir = workdir_ / fmt::format("{}-{}", containment.role, ++workers_started_);
  // Every role sees the precompiled headers (one zygote view for all); the builds and loads of
  // the candidate's extensions are offered this toolchain's (the reference builds nothing, and
  // starts before the toolchain is known).
  containment.headers_root = shared_.headers.root();
  if (builds) containment.headers_folder = shared_.headers.folder_name(toolchain().fingerprint);
  containment.memory_bytes = memory_limit();
}

WorkerSpec Evaluation::contained_worker(WorkerContainment containment,
                                        const std::filesystem::path& log, std::string& device,
                                        nlohmann::json* description) {
  complete_containment(containment);
  const ContainedCommand contained = contain_worker(containment, shared_.config.sandbox);
  if (!verdict_.details.contains("sandbox")) verdict_.details["sandbox"] = contained.description;
  if (description) *description = contained.description;
  device = contained.worker_device;
  WorkerSpec spec = contained_spec(containment, contained, log);
  spec.cpu_ledger = cpu_ledger_;
  return spec;
}

bool Evaluation::builds_sandboxed() const {
  return shared_.config.sandbox != SandboxPolicy::kOff && SandboxSupport::probe().available();
}

std::optional<BuildOutcome> Evaluation::build_elsewhere(const std::string& key) {
  BuildJob job;
  job.key = key;
  job.toolchain = toolchain().info;
  job.init_seed = seeds_.init;
  job.build_s = options_.limits.build_s;
  job.task_path = request_.task.string();
  job.task_source = read_file(request_.task);
  job.candidate_path = request_.candidate.string();
  job.candidate_source = read_file(request_.candidate);
  const auto folder = shared_.cache.extensions_dir(key);
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);  // what an interrupted build here left
  const auto start = Clock::now();
  auto remote = shared_.config.remote_builds->build(job, folder, options_.progress);
  if (!remote) return std::nullopt;
  BuildOutcome outcome;
  outcome.key = key;
  outcome.record = std::move(remote->record);
  outcome.cacheable = remote->cacheable;
  outcome.remote = std::move(remote->details);
  outcome.remote["wall_s"] = seconds_since(start);
  if (outcome.cacheable) shared_.cache.store(key, outcome.record);
  return outcome;
}

BuildOutcome Evaluation::ensure_built(const SourceInfo& candidate) {
  BuildOutcome outcome;
  // A build inside a sandbox sees another machine than one outside it (no $HOME, no network):
  // their outcomes are kept apart.
  const bool sandboxed = builds_sandboxed();
  outcome.key = shared_.cache.key(
      candidate.text,
      toolchain().fingerprint + (sandboxed ? "|sandboxed at /cudal1/extensions" : "") +
          (shared_.cuda_headers == CudaHeaders::kLight ? "|CUDA sources with a lighter header"
                                                       : ""));
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
  // A build worker makes it where one is configured: only a build that may compile, and only
  // a sandboxed one (its folder has the same path, /cudal1/extensions, on every host).
  if (shared_.config.remote_builds && sandboxed && may_build_extension(candidate) &&
      !job_toolchain_) {
    FileLock lock = shared_.cache.lock(outcome.key);
    if (auto record = shared_.cache.lookup(outcome.key)) {
      outcome.record = *record;
      outcome.cached = true;
      return outcome;
    }
    if (auto made = build_elsewhere(outcome.key)) return *made;
  }
  const auto slot_asked = Clock::now();
  shared_.build_slots.acquire();
  outcome.slot_wait_s = seconds_since(slot_asked);
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
  outcome.pch = shared_.headers.before_build(toolchain().fingerprint);
  report("building the candidate");
  const auto start = Clock::now();
  WorkerContainment build;
  build.role = "build";
  // The task too: the step constructs the candidate's model for the builds its constructor makes.
  build.inputs = {request_.candidate, request_.task};
  build.extensions_dir = shared_.cache.extensions_dir(outcome.key);
  build.extensions_writable = true;
  build.cpu_seconds = cpu_seconds_for(options_.limits.build_s);
  // Forked like the workers (PyTorch's import already paid by the zygote: 2 CPU-s a build on
  // this CPU machine, about 5 on an H100 host under load).
  build.forked = shared_.config.warm_workers;
  std::string device = device_;
  WorkerSpec spec = contained_worker(std::move(build), workdir_ / "build.log", device);
  // Builds (nvcc, ninja: most of a bench's CPU time) yield the CPU to the workers: a timing
  // phase's host side (each sample's round trip, the window clock) must not wait for a compiler.
  spec.nice = 10;
  nlohmann::json load = {{proto::request::kOp, proto::op::kLoad},
                         {proto::request::kRole, proto::role::kBuild},
                         {proto::request::kCandidate, spec.input_paths.at(0)},
                         {proto::request::kTask, spec.input_paths.at(1)},
                         {proto::request::kInitSeed, seeds_.init}};
  // A build for another host's GPU, here where the build sees none (build_for_host).
  const std::string arch = toolchain().cuda_arch_list();
  if (job_toolchain_ && toolchain().cuda_available && !arch.empty())
    load[proto::request::kBuildForGpu] = arch.substr(0, arch.find(';'));
  auto worker = WorkerClient::start(spec);
  try {
    const auto reply = worker->call(load, after(options_.limits.build_s));
    outcome.record.ok = true;
    if (reply.header.contains(proto::reply::kConstruction))
      outcome.record.construction = reply.header[proto::reply::kConstruction];
    if (reply.header.contains(proto::reply::kCudaHeaders))
      outcome.record.cuda_headers = reply.header[proto::reply::kCudaHeaders];
    outcome.cpu_s = {{"worker", reply.header.value(proto::reply::kCpuS, 0.0)},
                     {"compilers", reply.header.value(proto::reply::kChildrenCpuS, 0.0)}};
    if (reply.header.contains(proto::reply::kAutogroupNice))
      outcome.autogroup_nice = reply.header[proto::reply::kAutogroupNice];
  } catch (const WorkerError& e) {
    outcome.record.error = first_line(e.what(), kWholeLine);
    outcome.record.log = trim_log(e.traceback() + "\n" + worker->log_tail());
  } catch (const WorkerFailure& e) {
    // Not cached: a time-out or crash of the build may not happen again.
    outcome.record.error = fmt::format("building the candidate failed: {}", e.what());
    outcome.record.log = worker->log_tail();
    outcome.record.seconds = seconds_since(start);
    outcome.cacheable = false;
    return outcome;
  }
  worker->shutdown();
  // A forked build in a sandbox built into its own folder: into the cache with it, once none of
  // its processes is left to change it.
  if (!spec.build_output.empty())
    copy_folder_keeping_times(spec.build_output, shared_.cache.extensions_dir(outcome.key));
  outcome.record.seconds = seconds_since(start);
  shared_.cache.store(outcome.key, outcome.record);
  return outcome;
}

LocalEvaluator::HostBuild Evaluation::build_for_host(const BuildJob& job) {
  job_toolchain_ = Toolchain::from_info(job.toolchain);
  std::promise<const Toolchain*> ready;
  ready.set_value(&*job_toolchain_);
  toolchain_ = ready.get_future().share();
  // The build toolchain must be this host's: PyTorch's version, its CUDA, the compilers, where
  // the headers are. What differs besides (the GPUs, the kernel) the job's toolchain decides.
  const nlohmann::json wanted = build_toolchain(job.toolchain);
  const nlohmann::json here = build_toolchain(shared_.toolchain().info);
  if (wanted != here) {
    throw InputError(
        fmt::format("the job is for another build toolchain ({}) than this host's ({})",
                    wanted.dump(), here.dump()));
  }
  if (!builds_sandboxed()) {
    throw InputError(
        "builds for other hosts need this host's sandbox (their folder's path must be the same "
        "as on the evaluating host)");
  }
  seeds_ = SeedPlan::derive(0, options_.trials);
  seeds_.init = job.init_seed;
  // The step constructs the model on the CPU; no GPU is needed, or given, to build.
  device_ = "cpu";
  const SourceInfo candidate =
      inspect_source(request_.candidate, "candidate", shared_.config.worker);
  workdir_ = make_private_directory(shared_.config.cache_dir / "work", "build-");
  const WorkdirCleanup cleanup{workdir_, options_.keep_workdir};
  BuildOutcome outcome = ensure_built(candidate);
  if (outcome.key != job.key) {
    throw InputError(
        fmt::format("the job's build key {} is not that of its candidate and toolchain here ({})",
                    job.key, outcome.key));
  }
  LocalEvaluator::HostBuild out;
  out.record = std::move(outcome.record);
  out.cached = outcome.cached;
  out.cacheable = outcome.cacheable;
  out.folder = shared_.cache.extensions_dir(outcome.key);
  out.cpu_s = std::move(outcome.cpu_s);
  return out;
}

LocalEvaluator::HostBuild run_host_build(LocalEvaluator::Shared& shared, const EvalRequest& request,
                                         const BuildJob& job) {
  return Evaluation(shared, request).build_for_host(job);
}

}  // namespace cudal1
