// How an evaluation contains its worker processes (build, reference, candidate): each in a
// sandbox of its own (cudal1/common/sandbox.hpp) that sees the system read-only, its task and
// candidate files as read-only copies, its own build directory, its GPU's device nodes and no
// other, no network, no other process; with an allowlisted environment and kernel limits that
// hold for everything it starts. docs/evaluation.md ("Security model") says what that leaves.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/sandbox.hpp"
#include "cudal1/eval/worker_forks.hpp"

namespace cudal1 {

// --sandbox: auto uses bubblewrap where it works and says so in every verdict where it does not;
// on refuses to evaluate without it; off runs workers with the caller's view of the machine
// (still with the allowlisted environment and the limits).
enum class SandboxPolicy { kAuto, kOn, kOff };
SandboxPolicy parse_sandbox_policy(const std::string& text);  // InputError naming --sandbox
// Throws InputError (naming --sandbox on and why) when `policy` is on and no sandbox can be
// made on this machine: a command that evaluates here says so before it starts.
void require_sandbox_if_on(SandboxPolicy policy);
std::string to_string(SandboxPolicy policy);

// One GPU as a sandbox is given it: its device nodes, its identity, and how the worker inside
// names it (the only CUDA device it can see).
struct GpuAssignment {
  std::vector<std::filesystem::path> device_nodes;  // /dev/nvidiaN, nvidiactl, nvidia-uvm, ...
  std::string uuid;                                 // "GPU-...", as NVML spells it
  std::string bus;                                  // PCI address, from /proc/driver/nvidia
  std::filesystem::path proc_entry;                 // /proc/driver/nvidia/gpus/BUS
  bool isolated = false;       // only this GPU's nodes (false: every node, where the driver's
                               // list cannot say which is which)
  bool others_listed = false;  // the driver lists other GPUs too
};

// "cuda:N" -> the N-th GPU this process may use: CUDA_VISIBLE_DEVICES's N-th entry where it is
// set (an index or a UUID), else the N-th by PCI address. Empty with `why` where it cannot tell.
// (src/eval/gpu_assignment.cpp)
std::optional<GpuAssignment> assign_gpu(const std::string& device, std::string& why);
// Every /dev/nvidia* node: where the driver's list cannot say which GPU is which.
std::vector<std::filesystem::path> all_nvidia_nodes();

struct WorkerContainment {
  std::string role;               // "build", "reference", "candidate"
  std::filesystem::path program;  // the worker
  std::string device;             // "cpu" or "cuda:N"
  // Files the worker reads (task, candidate): copied into `private_dir` and seen read-only at
  // their own paths, so nothing the candidate runs can change what any later process reads.
  std::vector<std::filesystem::path> inputs;
  // TORCH_EXTENSIONS_DIR. The build writes the cache's own directory (a forked one in a sandbox:
  // its own copy, collected afterwards); a candidate gets a private copy at the same path (ninja's
  // files name it), so it cannot change what later loads.
  std::filesystem::path extensions_dir;
  bool extensions_writable = false;
  // The build cache's precompiled headers (PrecompiledHeaders::root): read-only to every worker
  // (a sandbox sees it at /cudal1/pch); with `headers_folder` set, the worker's builds get that
  // folder first among their include directories (CUDAL1_PCH_DIR).
  std::filesystem::path headers_root;
  std::string headers_folder;
  std::filesystem::path private_dir;  // this worker's own files (created; the caller removes it)
  // Where the device locks are: a GPU worker's gate takes its device's (read-write); where the
  // GPU cannot be told apart, the whole directory is bound.
  std::filesystem::path lock_dir;
  std::map<std::string, std::string> environment;  // overrides of the allowlisted environment
  std::uint64_t cpu_seconds = 0;                   // RLIMIT_CPU of each process; 0: none
  std::uint64_t memory_bytes = 0;  // its cgroup's memory.max, where cgroups can be had
  // A fork of this device's warm zygote rather than a process of its own. A forked build in a
  // sandbox writes a private copy of `extensions_dir` (ContainedCommand::build_output).
  bool forked = false;
  // Started ahead of its evaluation (cudal1/eval/ready_workers.hpp): forked, with no role yet and
  // no inputs; its inputs and extensions folders are made empty, for assign_ready_worker to fill.
  bool ready = false;
};

// A worker's command, environment and limits, contained per `policy`.
struct ContainedCommand {
  std::vector<std::string> argv;
  std::map<std::string, std::string> environment;  // all of it (nothing inherited)
  ProcessLimits limits;
  std::string worker_device;                // what the worker is told ("cuda:0" inside a sandbox)
  std::filesystem::path working_directory;  // without a sandbox: its private directory
  bool sandboxed = false;
  std::shared_ptr<CgroupScope> cgroup;  // where cgroup v2 gives memory and pids limits
  nlohmann::json description;           // verdict details.sandbox
  // Where the worker finds each of WorkerContainment::inputs.
  std::vector<std::filesystem::path> input_paths;
  // Set for a forked worker (argv is then empty): what its zygote is asked.
  std::shared_ptr<ForkedStart> forked;
  // A forked build in a sandbox: the folder its TORCH_EXTENSIONS_DIR is, whose contents go to
  // the cache's `extensions_dir` once the build succeeded (copy_folder_keeping_times).
  std::filesystem::path build_output;
  // A forked worker: its folder in the zygote's spool and, in root mode, its user.
  std::filesystem::path fork_folder;
  std::optional<SandboxUser> fork_user;
};

// Throws InputError when `policy` is on and no sandbox can be made here. A forked worker whose
// zygote cannot start is started as a process of its own instead (with a warning, once).
ContainedCommand contain_worker(const WorkerContainment& worker, SandboxPolicy policy);

// Gives the ready worker `ready` (contained with WorkerContainment::ready) the role of `worker`:
// read-only copies of its inputs and a private copy of its build, put in the folders its view
// already shows; `ready.input_paths` says where it finds them. Returns the variables of that
// role (TORCH_EXTENSIONS_DIR, TORCH_CUDA_ARCH_LIST, CUDAL1_PCH_DIR), which its load sets before
// the task's import, as a fork of that role has them from its start.
std::map<std::string, std::string> assign_ready_worker(const WorkerContainment& worker,
                                                       ContainedCommand& ready);

}  // namespace cudal1
