#include "cudal1/eval/worker_sandbox.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "cudal1/common/error.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/eval/device_lock.hpp"
#include "cudal1/python_roots.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

namespace fs = std::filesystem;

// Private /tmp and /dev/shm: room for PyTorch's and Triton's caches of compiled kernels (tens of
// MB), bounded because tmpfs pages are memory that no resident-size check counts.
constexpr std::uint64_t kTmpBytes = 512ull << 20;
// The largest file a worker writes: a fat binary for every architecture fits with room, a log
// or a file that grows until the disk is full does not.
constexpr std::uint64_t kMaxFileBytes = 4ull << 30;
// Processes and threads of one sandbox's user (root mode). PyTorch starts one OpenMP thread per
// core and ninja one compiler per core; a fork bomb stops here instead of at the machine's limit.
constexpr std::uint64_t kMaxTasks = 4096;

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(separator, start), text.size());
    if (end > start) parts.push_back(trim(text.substr(start, end - start)));
    start = end + 1;
  }
  return parts;
}

// Where a program is installed: /opt/gcc for /opt/gcc/bin/g++ (a compiler needs its libexec
// and its own libraries), the program's directory otherwise.
fs::path install_root(const fs::path& program) {
  std::error_code ec;
  const fs::path real = fs::canonical(program, ec);
  if (ec) return {};
  const fs::path dir = real.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

fs::path on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path != nullptr ? path : "", ':')) {
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Directories the worker reads besides /usr: the interpreter's, the compilers a build calls
// (CC, CXX, or the first c++, g++, nvcc on PATH: GPU images put GCC in /opt/gcc), and the CUDA
// toolkit and libraries the caller's environment names.
std::vector<fs::path> read_only_roots() {
  std::vector<fs::path> roots;
  const auto parsed = nlohmann::json::parse(kPythonRootsJson, nullptr, false);
  if (parsed.is_array())
    for (const auto& root : parsed) roots.emplace_back(root.get<std::string>());
  for (const char* name : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* value = std::getenv(name); value != nullptr && *value)
      roots.emplace_back(value);
  if (const char* libraries = std::getenv("LD_LIBRARY_PATH"))
    for (const auto& dir : split(libraries, ':')) roots.emplace_back(dir);
  std::vector<std::string> compilers = {"cc", "c++", "gcc", "g++", "nvcc", "ninja"};
  for (const char* name : {"CC", "CXX"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value) compilers.push_back(split(value, ' ').front());
  }
  for (const auto& compiler : compilers)
    if (const fs::path program = on_path(compiler); !program.empty())
      roots.push_back(install_root(program));
  const char* home = std::getenv("HOME");
  std::vector<fs::path> kept;
  for (auto root : roots) {
    std::error_code ec;
    if (!root.is_absolute() || !fs::is_directory(root, ec)) continue;
    root = root.lexically_normal();
    const std::string text = root.string();
    // The system's own directories are mounted anyway; the root of everything and a whole
    // home directory never are.
    if (text == "/" || text == "/usr" || text.rfind("/usr/", 0) == 0) continue;
    if (home != nullptr && root == fs::path(home).lexically_normal()) continue;
    if (std::find(kept.begin(), kept.end(), root) == kept.end()) kept.push_back(root);
  }
  return kept;
}

void give_to(const fs::path& path, const std::optional<SandboxUser>& user) {
  if (!user) return;
  std::error_code ec;
  (void)::lchown(path.c_str(), user->uid, user->gid);
  if (!fs::is_directory(fs::symlink_status(path, ec))) return;
  for (const auto& entry : fs::recursive_directory_iterator(path, ec))
    (void)::lchown(entry.path().c_str(), user->uid, user->gid);
}

void ensure_lock_file(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream(path, std::ios::app);
  ::chmod(path.c_str(), 0666);  // shared between users, as FileLock makes it
}

const char* mode_name(SandboxSupport::Mode mode) {
  switch (mode) {
    case SandboxSupport::Mode::kRootUser:
      return "root-user";
    case SandboxSupport::Mode::kUserNamespace:
      return "user-namespace";
    case SandboxSupport::Mode::kUnavailable:
      break;
  }
  return "none";
}

}  // namespace

SandboxPolicy parse_sandbox_policy(const std::string& text) {
  if (text == "auto") return SandboxPolicy::kAuto;
  if (text == "on") return SandboxPolicy::kOn;
  if (text == "off") return SandboxPolicy::kOff;
  throw InputError(fmt::format("--sandbox '{}' is not understood: use auto, on or off", text));
}

void require_sandbox_if_on(SandboxPolicy policy) {
  const SandboxSupport& support = SandboxSupport::probe();
  if (policy == SandboxPolicy::kOn && !support.available())
    throw InputError("--sandbox on: no sandbox can be made here: " + support.why_unavailable);
}

std::string to_string(SandboxPolicy policy) {
  switch (policy) {
    case SandboxPolicy::kOn:
      return "on";
    case SandboxPolicy::kOff:
      return "off";
    case SandboxPolicy::kAuto:
      break;
  }
  return "auto";
}

namespace {

// Without a sandbox a process sees what cudal1 sees; it still gets no secrets from the
// environment and writes its scratch files into a directory of its own.
void run_unsandboxed(const WorkerContainment& worker, std::map<std::string, std::string> env,
                     const std::string& why, ContainedCommand& out) {
  const fs::path home = worker.private_dir / "home";
  fs::create_directories(home);
  env["HOME"] = env["TMPDIR"] = home.string();
  out.working_directory = home;
  out.environment = allowlisted_environment(env);
  out.argv = {worker.program.string(), proto::mode::kServe};
  out.description = {{"enabled", false}, {"why", why}};
}

// Read-only copies of the worker's inputs in `dir`, one per input ("<i>-<name>"), in order.
std::vector<fs::path> copy_inputs(const WorkerContainment& worker, const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<fs::path> copies;
  for (std::size_t i = 0; i < worker.inputs.size(); ++i) {
    const fs::path source = fs::absolute(worker.inputs[i]);
    const fs::path copy = dir / fmt::format("{}-{}", i, source.filename().string());
    fs::copy_file(source, copy, fs::copy_options::overwrite_existing);
    ::chmod(copy.c_str(), 0444);
    copies.push_back(copy);
  }
  return copies;
}

// A private copy of the build cache's folder `from` (empty where nothing was built) at `to`.
void copy_extensions(const fs::path& from, const fs::path& to,
                     const std::optional<SandboxUser>& user) {
  std::error_code ec;
  fs::create_directories(to);
  // Into the folder as it is: a ready worker's view binds it already.
  if (fs::is_directory(from, ec)) copy_into_folder_keeping_times(from, to);
  give_to(to, user);
}

// The worker program and the read-only roots (the same for every worker of this process).
void mount_system(const WorkerContainment& worker, SandboxView& view) {
  view.mounts.push_back({SandboxMount::Access::kReadOnly, fs::absolute(worker.program), {}});
  static const std::vector<fs::path> roots = read_only_roots();
  for (const auto& root : roots) view.mounts.push_back({SandboxMount::Access::kReadOnly, root, {}});
  if (!worker.headers_root.empty()) {  // the same for every role, so one zygote serves them all
    fs::create_directories(worker.headers_root);
    view.mounts.push_back({SandboxMount::Access::kReadOnly, fs::absolute(worker.headers_root),
                           proto::fork::kHeadersPath});
  }
}

// CUDAL1_PCH_DIR: where the worker's builds look for the precompiled header first.
std::string headers_dir_seen(const WorkerContainment& worker, bool sandboxed) {
  if (worker.headers_root.empty() || worker.headers_folder.empty()) return "";
  return sandboxed ? (fs::path(proto::fork::kHeadersPath) / worker.headers_folder).string()
                   : (fs::absolute(worker.headers_root) / worker.headers_folder).string();
}

// TORCH_EXTENSIONS_DIR: the build cache's own directory for a build, a private copy otherwise.
void mount_extensions(const WorkerContainment& worker, SandboxView& view) {
  if (worker.extensions_dir.empty()) return;
  const fs::path target = fs::absolute(worker.extensions_dir);
  const fs::path source = worker.extensions_writable ? target : worker.private_dir / "extensions";
  // One path for every sandboxed build and load, whichever cache folder: a forked worker, whose
  // view is made before its candidate is known, finds its build where the build left it.
  const fs::path seen_at = proto::fork::kExtensionsPath;
  if (worker.extensions_writable) {
    fs::create_directories(source);
    give_to(source, view.user);
  } else {
    copy_extensions(target, source, view.user);
  }
  view.mounts.push_back({SandboxMount::Access::kWritable, source, seen_at});
}

// The GPU's device nodes and its device locks (the worker's gate takes them); the worker then
// calls it cuda:0. Returns the verdict's description of what it was given.
nlohmann::json mount_gpu(const WorkerContainment& worker, SandboxView& view,
                         std::map<std::string, std::string>& env, std::string& worker_device) {
  using Access = SandboxMount::Access;
  std::string why;
  const auto assigned = assign_gpu(worker.device, why);
  if (!assigned) {
    for (const auto& node : all_nvidia_nodes()) view.mounts.push_back({Access::kDevice, node, {}});
    if (!worker.lock_dir.empty()) {
      fs::create_directories(worker.lock_dir);
      view.mounts.push_back({Access::kWritable, worker.lock_dir, {}});
    }
    return {{"isolated", false}, {"why", why}};
  }
  for (const auto& node : assigned->device_nodes)
    view.mounts.push_back({Access::kDevice, node, {}});
  if (assigned->others_listed) {
    // NVML lists the GPUs of the driver's /proc directory: only this one.
    view.hidden.push_back(assigned->proc_entry.parent_path());
    view.mounts.push_back({Access::kReadOnly, assigned->proc_entry, {}});
  }
  env["CUDA_VISIBLE_DEVICES"] = assigned->uuid;
  worker_device = "cuda:0";
  const fs::path lock = device_lock_path(worker.lock_dir, assigned->uuid);
  for (const auto& file : {lock, device_turnstile_path(lock)}) {
    ensure_lock_file(file);
    view.mounts.push_back({Access::kWritable, file, {}});
  }
  return {{"uuid", assigned->uuid}, {"bus", assigned->bus}, {"isolated", true}};
}

// The worker's cgroup where this machine lets cudal1 make one (its memory.max and pids.max hold
// for everything it starts, tmpfs pages included); what the verdict says of it.
nlohmann::json limit_by_cgroup(const WorkerContainment& worker, ContainedCommand& out) {
  const CgroupSupport& support = CgroupSupport::probe();
  if (!support.available()) return {{"enabled", false}, {"why", support.why_unavailable}};
  try {
    const std::uint64_t memory = worker.memory_bytes > 0 ? worker.memory_bytes : UINT64_MAX / 2;
    out.cgroup = std::make_shared<CgroupScope>(support, memory, kMaxTasks);
  } catch (const std::exception& e) {
    fmt::print(stderr, "cudal1: warning: the worker runs without a cgroup: {}\n", e.what());
    return {{"enabled", false}, {"why", e.what()}};
  }
  return {{"enabled", true},
          {"path", out.cgroup->path().string()},
          {"memory_max", worker.memory_bytes},
          {"pids_max", kMaxTasks}};
}

void warn_once_without_sandbox(const SandboxSupport& support) {
  static std::once_flag warned;
  std::call_once(warned, [&] {
    // stderr: stdout is the verdict's.
    fmt::print(stderr,
               "cudal1: warning: no sandbox ({}): candidates run with cudal1's own view of the "
               "machine; --sandbox on refuses to evaluate without one (docs/evaluation.md, "
               "\"Security model\")\n",
               support.why_unavailable);
  });
}

void warn_once_without_forks(const std::string& why) {
  static std::once_flag warned;
  std::call_once(warned, [&] {
    fmt::print(stderr, "cudal1: warning: workers are started one by one ({})\n", why);
  });
}

// The zygote for forks of `worker`: shared by this user's cudal1 processes with the same key
// (spool named by user and key), or this process's own (named by its pid too).
ZygoteSpec zygote_spec(const WorkerContainment& worker, const SandboxSupport& support,
                       SandboxView view, const std::map<std::string, std::string>& env,
                       bool sandboxed, bool shared) {
  namespace fk = proto::fork;
  ZygoteSpec spec;
  spec.shared = shared;
  spec.process.environment = allowlisted_environment(env);
  // The worker program by its path, size and time: a rebuilt one gets a zygote of its own.
  std::error_code ec;
  const auto program_time = fs::last_write_time(worker.program, ec).time_since_epoch().count();
  spec.key = fmt::format(
      "{}|{}|{}|{}@{}:{}|{}|{}", worker.device, sandboxed, mode_name(support.mode),
      fs::absolute(worker.program).string(), fs::file_size(worker.program, ec), program_time,
      nlohmann::json(spec.process.environment).dump(), worker.headers_root.string());
  const std::string owner =
      shared ? std::to_string(::geteuid()) : fmt::format("{}-{}", ::geteuid(), ::getpid());
  spec.spool = fs::temp_directory_path() /
               fmt::format("cudal1-zygote-{}-{:016x}", owner, std::hash<std::string>{}(spec.key));
  const std::vector<std::string> command = {fs::absolute(worker.program).string(),
                                            proto::mode::kZygote};
  if (sandboxed) {
    view.mounts.push_back({SandboxMount::Access::kWritable, spec.spool, fk::kSpoolPath});
    view.directories = {fk::kInputsPath, fk::kExtensionsPath};
    view.outlives_caller = shared;
    spec.process.argv = sandbox_argv(support, view, command);
  } else {
    spec.process.argv = command;
    spec.process.working_directory = spec.spool;
  }
  spec.process.inherit_environment = false;
  spec.process.control_socket = true;
  spec.process.log_file = spec.spool / "zygote.log";
  spec.process.limits.core_dumps = false;
  return spec;
}

// What a fork of `worker`'s role finds in its spool folder (its inputs, read-only inside, and in
// a sandbox a private copy of its build, into the folder as it is: a ready worker's view binds it
// already), where it finds them (`out.input_paths`), and that role's variables.
std::map<std::string, std::string> fill_fork_folder(const WorkerContainment& worker,
                                                    const fs::path& folder,
                                                    const std::optional<SandboxUser>& user,
                                                    ContainedCommand& out) {
  namespace fk = proto::fork;
  out.input_paths.clear();
  for (const fs::path& copy : copy_inputs(worker, folder / "inputs"))
    out.input_paths.push_back(out.sandboxed ? fs::path(fk::kInputsPath) / copy.filename() : copy);
  std::map<std::string, std::string> role;
  if (const auto it = worker.environment.find("TORCH_CUDA_ARCH_LIST");
      it != worker.environment.end())
    role[it->first] = it->second;
  if (const std::string headers = headers_dir_seen(worker, out.sandboxed); !headers.empty())
    role["CUDAL1_PCH_DIR"] = headers;
  if (!worker.extensions_dir.empty()) role["TORCH_EXTENSIONS_DIR"] = worker.extensions_dir.string();
  if (out.sandboxed && (!worker.extensions_dir.empty() || worker.ready)) {
    copy_extensions(worker.extensions_dir, folder / "extensions", user);  // a ready one's: empty
    role["TORCH_EXTENSIONS_DIR"] = fk::kExtensionsPath;
    if (worker.extensions_writable) out.build_output = folder / "extensions";
  }
  return role;
}

// The zygote of this device and containment, and the spawn request of one worker forked from it:
// its folder in the spool (its inputs, a private copy of its build folder), its own variables,
// limits and, in root mode, user. The zygote's view is a worker's (system, interpreter, its GPU)
// with the spool instead of any one worker's files.
void contain_forked(const WorkerContainment& worker, const SandboxSupport& support,
                    std::map<std::string, std::string> env, ContainedCommand& out) {
  namespace fk = proto::fork;
  const bool sandboxed = out.sandboxed;
  // The role's variables are the fork's own (fill_fork_folder), not its zygote's.
  for (const char* name : {"TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "CUDAL1_PCH_DIR"})
    env.erase(name);
  SandboxView view;
  view.tmp_bytes = kTmpBytes;
  view.forks = true;
  nlohmann::json gpu;
  if (sandboxed) {
    mount_system(worker, view);
    if (worker.device != "cpu") gpu = mount_gpu(worker, view, env, out.worker_device);
    env["HOME"] = env["TMPDIR"] = "/tmp";
  }
  ZygoteSpec spec = zygote_spec(worker, support, view, env, sandboxed, true);
  std::shared_ptr<Zygote> zygote;
  try {
    zygote = Zygote::obtain(spec);
  } catch (const std::runtime_error& e) {
    // No shared one here (its folder not private, its socket's path too long): one of its own.
    fmt::print(stderr, "cudal1: warning: a warm-worker zygote of this process only: {}\n",
               e.what());
    spec = zygote_spec(worker, support, view, env, sandboxed, false);
    zygote = Zygote::obtain(spec);
  }
  static std::atomic<std::uint64_t> counter{0};
  const std::string name = fmt::format("{}-{}-{}", worker.role, ::getpid(), ++counter);
  const fs::path folder = zygote->spool() / name;  // the spool of the zygote this process uses
  nlohmann::json request = {{fk::kName, name},
                            {fk::kSandboxed, sandboxed},
                            {fk::kFileBytes, kMaxFileBytes},
                            {fk::kTmpBytes, kTmpBytes}};
  if (worker.cpu_seconds > 0) request[fk::kCpuSeconds] = worker.cpu_seconds;
  std::optional<SandboxUser> user;
  if (sandboxed && support.mode == SandboxSupport::Mode::kRootUser) {
    user = next_sandbox_user();
    request[fk::kUid] = user->uid;
    request[fk::kGid] = user->gid;
    request[fk::kTasks] = kMaxTasks;
  }
  out.sandboxed = sandboxed;
  std::map<std::string, std::string> own = fill_fork_folder(worker, folder, user, out);
  if (!sandboxed) {
    fs::create_directories(folder / "home");
    own["HOME"] = own["TMPDIR"] = (folder / "home").string();
    request[fk::kDirectory] = (folder / "home").string();
  } else {
    request[fk::kDirectory] = "/tmp";
  }
  request[fk::kEnvironment] = own;
  out.fork_folder = folder;
  out.fork_user = user;
  out.forked = std::make_shared<ForkedStart>(ForkedStart{std::move(zygote), std::move(request)});
  out.description = {{"enabled", sandboxed}, {"forked", true}};
  if (sandboxed) {
    out.description["tool"] = "bubblewrap";
    out.description["mode"] = mode_name(support.mode);
    out.description["limits"] = {{"tmp_bytes", kTmpBytes},
                                 {"file_bytes", kMaxFileBytes},
                                 {"tasks", user ? nlohmann::json(kMaxTasks) : nlohmann::json()}};
  } else {
    out.description["why"] = support.available() ? "--sandbox off" : support.why_unavailable;
  }
  if (user) out.description["uid"] = user->uid;
  if (!gpu.is_null()) out.description["gpu"] = gpu;
  if (worker.ready) out.description["ready"] = true;
}

}  // namespace

std::map<std::string, std::string> assign_ready_worker(const WorkerContainment& worker,
                                                       ContainedCommand& ready) {
  if (!ready.forked || ready.fork_folder.empty())
    throw std::logic_error("assign_ready_worker: not a ready worker");
  return fill_fork_folder(worker, ready.fork_folder, ready.fork_user, ready);
}

ContainedCommand contain_worker(const WorkerContainment& worker, SandboxPolicy policy) {
  const SandboxSupport& support =
      policy == SandboxPolicy::kOff ? SandboxSupport{} : SandboxSupport::probe();
  require_sandbox_if_on(policy);
  if (policy == SandboxPolicy::kAuto && !support.available()) warn_once_without_sandbox(support);

  ContainedCommand out;
  out.sandboxed = support.available() && policy != SandboxPolicy::kOff;
  out.worker_device = worker.device;
  out.limits.file_bytes = kMaxFileBytes;
  out.limits.core_dumps = false;
  if (worker.cpu_seconds > 0) out.limits.cpu_seconds = worker.cpu_seconds;
  fs::create_directories(worker.private_dir);
  std::map<std::string, std::string> env = worker.environment;
  env["USER"] = env["LOGNAME"] = "cudal1";
  if (!worker.extensions_dir.empty()) env["TORCH_EXTENSIONS_DIR"] = worker.extensions_dir.string();
  if (const std::string headers = headers_dir_seen(worker, out.sandboxed); !headers.empty())
    env["CUDAL1_PCH_DIR"] = headers;
  const nlohmann::json cgroup = limit_by_cgroup(worker, out);
  if (worker.forked) {
    try {
      contain_forked(worker, support, env, out);
      out.description["cgroup"] = cgroup;
      return out;
    } catch (const std::runtime_error& e) {
      warn_once_without_forks(e.what());
      out.input_paths.clear();
      out.forked.reset();
      out.worker_device = worker.device;
    }
  }
  if (!out.sandboxed) {
    for (const auto& input : worker.inputs) out.input_paths.push_back(fs::absolute(input));
    run_unsandboxed(worker, env,
                    policy == SandboxPolicy::kOff ? "--sandbox off" : support.why_unavailable, out);
    out.description["cgroup"] = cgroup;
    return out;
  }

  SandboxView view;
  view.tmp_bytes = kTmpBytes;
  if (support.mode == SandboxSupport::Mode::kRootUser) {
    view.user = next_sandbox_user();
    out.limits.tasks = kMaxTasks;
  }
  mount_system(worker, view);
  const std::vector<fs::path> copies = copy_inputs(worker, worker.private_dir / "inputs");
  for (std::size_t i = 0; i < copies.size(); ++i) {  // seen read-only at their own paths
    out.input_paths.push_back(fs::absolute(worker.inputs[i]));
    view.mounts.push_back({SandboxMount::Access::kReadOnly, copies[i], out.input_paths.back()});
  }
  mount_extensions(worker, view);
  if (!worker.extensions_dir.empty()) env["TORCH_EXTENSIONS_DIR"] = proto::fork::kExtensionsPath;
  const nlohmann::json gpu =
      worker.device == "cpu" ? nlohmann::json() : mount_gpu(worker, view, env, out.worker_device);

  env["HOME"] = env["TMPDIR"] = "/tmp";
  out.environment = allowlisted_environment(env);
  out.argv =
      sandbox_argv(support, view, {fs::absolute(worker.program).string(), proto::mode::kServe});
  out.description = {{"enabled", true}, {"tool", "bubblewrap"}, {"mode", mode_name(support.mode)}};
  if (view.user) out.description["uid"] = view.user->uid;
  if (!gpu.is_null()) out.description["gpu"] = gpu;
  out.description["cgroup"] = cgroup;
  out.description["limits"] = {
      {"tmp_bytes", kTmpBytes},
      {"file_bytes", kMaxFileBytes},
      {"tasks", out.limits.tasks ? nlohmann::json(*out.limits.tasks) : nlohmann::json(nullptr)}};
  return out;
}

}  // namespace cudal1
