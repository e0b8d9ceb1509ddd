#include "cudal1/common/sandbox.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cudal1/common/process.hpp"

extern char** environ;

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

// What a build (gcc, nvcc, ninja) and a PyTorch process read in /etc: the dynamic linker's
// cache, the alternatives behind `c++` and CUDA's links, time zone, the distribution's Python
// site hooks. Not passwd, shadow, hosts, ssh, ssl, or anything else of the host's.
constexpr const char* kEtcEntries[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d",   "alternatives", "localtime",
    "timezone",    "os-release", "debian_version", "lsb-release",  "nsswitch.conf",
};

// The variables a build and a PyTorch run may need from the caller's environment: where the
// toolchain is, and how the math libraries and runtimes are tuned for this machine (a VM's
// OPENBLAS_CORETYPE, OMP_NUM_THREADS, CUDA's and PyTorch's own settings).
constexpr const char* kAllowedNames[] = {"PATH",
                                         "LANG",
                                         "LANGUAGE",
                                         "TZ",
                                         "LD_LIBRARY_PATH",
                                         "LIBRARY_PATH",
                                         "CPATH",
                                         "C_INCLUDE_PATH",
                                         "CPLUS_INCLUDE_PATH",
                                         "MAX_JOBS",
                                         "CC",
                                         "CXX",
                                         "NVCC_PREPEND_FLAGS",
                                         "NVCC_APPEND_FLAGS",
                                         "GLIBC_TUNABLES",
                                         "NVIDIA_TF32_OVERRIDE",
                                         "CUBLAS_WORKSPACE_CONFIG",
                                         "CUBLASLT_WORKSPACE_SIZE",
                                         "CUDNN_LOGINFO_DBG"};
constexpr const char* kAllowedPrefixes[] = {"LC_",    "OMP_",      "GOMP_",   "KMP_",
                                            "MKL_",   "OPENBLAS_", "NVPL_",   "CUDA_",
                                            "TORCH_", "PYTORCH_",  "TRITON_", "TORCHINDUCTOR_"};

// Parts of a name that mark a credential or a way out, whichever list let it through.
constexpr const char* kRefusedParts[] = {"TOKEN",      "KEY",  "SECRET", "PASSWORD", "PASSWD",
                                         "CREDENTIAL", "AUTH", "PROXY",  "CUDAL1"};

bool refused_name(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::any_of(std::begin(kRefusedParts), std::end(kRefusedParts),
                     [&](const char* part) { return upper.find(part) != std::string::npos; });
}

bool allowed_name(const std::string& name) {
  if (refused_name(name)) return false;
  return std::any_of(std::begin(kAllowedNames), std::end(kAllowedNames),
                     [&](const char* allowed) { return name == allowed; }) ||
         std::any_of(std::begin(kAllowedPrefixes), std::end(kAllowedPrefixes),
                     [&](const char* prefix) { return name.rfind(prefix, 0) == 0; });
}

fs::path find_program(const std::string& name, const char* override_variable) {
  if (const char* given = std::getenv(override_variable); given != nullptr && *given != '\0')
    return given;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/bin:/bin:/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
    if (!candidate.parent_path().empty() && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return {};
}

void add(std::vector<std::string>& argv, std::initializer_list<std::string> items) {
  argv.insert(argv.end(), items);
}

// /usr, and the top-level directories that merged-/usr systems make links into it.
void add_system_directories(std::vector<std::string>& argv) {
  add(argv, {"--ro-bind", "/usr", "/usr"});
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    const auto status = fs::symlink_status(top, ec);
    if (ec || !fs::exists(status)) continue;
    if (fs::is_symlink(status)) {
      add(argv, {"--symlink", fs::read_symlink(top, ec).string(), top});
    } else if (fs::is_directory(status)) {
      add(argv, {"--ro-bind", top, top});
    }
  }
  add(argv, {"--perms", "0755", "--dir", "/etc"});  // made 0700 otherwise
  for (const char* entry : kEtcEntries) {
    const fs::path path = fs::path("/etc") / entry;
    std::error_code ec;
    if (fs::exists(path, ec)) add(argv, {"--ro-bind", path.string(), path.string()});
  }
  // Debian's Python reads its site hooks from /etc/python3.N.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/etc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3", 0) == 0) add(argv, {"--ro-bind", entry.path(), entry.path()});
  }
  // CUDA and PyTorch read the machine's topology (PCI, NUMA, CPUs) there.
  if (fs::exists("/sys", ec)) add(argv, {"--ro-bind", "/sys", "/sys"});
}

// Directories that exist in every sandbox, with what is below them (the private /tmp is empty:
// what is mounted below it needs its parents made).
bool under_system_directory(const fs::path& path) {
  static const char* kSystem[] = {"/usr",  "/etc", "/sys",   "/proc",  "/dev",   "/bin",
                                  "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
  const std::string text = path.string();
  if (text == "/tmp") return true;
  return std::any_of(std::begin(kSystem), std::end(kSystem), [&](const char* top) {
    const std::string prefix(top);
    return text == prefix || text.rfind(prefix + "/", 0) == 0;
  });
}

std::string mount_option(SandboxMount::Access access) {
  switch (access) {
    case SandboxMount::Access::kWritable:
      return "--bind";
    case SandboxMount::Access::kDevice:
      return "--dev-bind";
    case SandboxMount::Access::kReadOnly:
      break;
  }
  return "--ro-bind";
}

bool runs_here(const SandboxSupport& support) {
  SandboxView view;
  view.tmp_bytes = 1 << 20;
  if (support.mode == SandboxSupport::Mode::kRootUser) view.user = SandboxUser{65534, 65534};
  ProcessSpec spec;
  spec.argv = sandbox_argv(support, view, {"/bin/true"});
  spec.inherit_environment = false;
  try {
    auto child = ChildProcess::spawn(spec);
    const auto status = child->wait_or_kill(30.0);
    return status && !status->signaled && status->code == 0;
  } catch (const std::exception&) {
    return false;
  }
}

SandboxSupport find_sandbox_support() {
  SandboxSupport support;
  support.bwrap = find_program("bwrap", "CUDAL1_BWRAP");
  if (support.bwrap.empty() || ::access(support.bwrap.c_str(), X_OK) != 0) {
    support.why_unavailable =
        "bubblewrap (bwrap) is not installed" +
        (support.bwrap.empty() ? std::string() : " at " + support.bwrap.string()) +
        ": apt-get install bubblewrap";
    return support;
  }
  if (::geteuid() == 0) {
    support.setpriv = find_program("setpriv", "CUDAL1_SETPRIV");
    if (support.setpriv.empty()) {
      support.why_unavailable = "setpriv (util-linux) is not installed";
      return support;
    }
    support.mode = SandboxSupport::Mode::kRootUser;
  } else {
    support.mode = SandboxSupport::Mode::kUserNamespace;
  }
  if (!runs_here(support)) {
    support.mode = SandboxSupport::Mode::kUnavailable;
    support.why_unavailable = fmt::format(
        "{} cannot make a sandbox on this machine (as {}: {})", support.bwrap.string(),
        ::geteuid() == 0 ? "root" : "this user",
        ::geteuid() == 0 ? "namespaces refused" : "unprivileged user namespaces refused");
  }
  return support;
}

}  // namespace

std::string SandboxSupport::describe() const {
  switch (mode) {
    case Mode::kRootUser:
      return fmt::format("bubblewrap ({}), root mode: a user of its own per sandbox",
                         bwrap.string());
    case Mode::kUserNamespace:
      return fmt::format("bubblewrap ({}), user-namespace mode: the caller's user, no capabilities",
                         bwrap.string());
    case Mode::kUnavailable:
      break;
  }
  return "unavailable: " + why_unavailable;
}

const SandboxSupport& SandboxSupport::probe() {
  static const SandboxSupport support = find_sandbox_support();
  return support;
}

std::vector<std::string> sandbox_argv(const SandboxSupport& support, const SandboxView& view,
                                      const std::vector<std::string>& command) {
  std::vector<std::string> argv = {support.bwrap.string()};
  if (support.mode == SandboxSupport::Mode::kUserNamespace) {
    add(argv, {"--unshare-user", "--disable-userns", "--cap-drop", "ALL"});
    if (view.forks) add(argv, {"--cap-add", "CAP_SETPCAP"});
  } else {
    // Only what setpriv needs to become the sandbox's user; it gives them up with the change.
    add(argv, {"--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
               "--cap-add", "CAP_SETPCAP"});
  }
  add(argv, {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--new-session", "--hostname", "sandbox"});
  if (!view.outlives_caller) add(argv, {"--die-with-parent"});
  if (view.forks) add(argv, {"--cap-add", "CAP_SYS_ADMIN"});
  // Root mode: its forks' workers become users of their own, which only CAP_KILL may kill.
  if (view.forks && support.mode != SandboxSupport::Mode::kUserNamespace)
    add(argv, {"--cap-add", "CAP_KILL"});
  add_system_directories(argv);
  add(argv, {"--proc", "/proc", "--dev", "/dev"});
  const std::string size = std::to_string(view.tmp_bytes);
  add(argv, {"--perms", "01777", "--size", size, "--tmpfs", "/tmp"});
  add(argv, {"--perms", "01777", "--size", size, "--tmpfs", "/dev/shm"});
  // Mounts by depth, parents before what is mounted inside them. A hidden folder becomes an empty
  // tmpfs after the mounts above it and before its entries mounted back (bubblewrap makes their
  // mount points there), and read-only once they are in place (below).
  struct Step {
    fs::path target;
    const SandboxMount* mount;  // null: a hidden folder
  };
  std::vector<Step> steps;
  for (const auto& mount : view.mounts)
    steps.push_back({mount.target.empty() ? mount.source : mount.target, &mount});
  for (const auto& hidden : view.hidden) steps.push_back({hidden, nullptr});
  const auto rank = [](const Step& s) {
    return 2 * std::distance(s.target.begin(), s.target.end()) + (s.mount ? 0 : 1);
  };
  std::stable_sort(steps.begin(), steps.end(),
                   [&](const Step& a, const Step& b) { return rank(a) < rank(b); });
  const auto in_hidden = [&](const fs::path& path) {
    return std::any_of(view.hidden.begin(), view.hidden.end(), [&](const fs::path& hidden) {
      return std::mismatch(hidden.begin(), hidden.end(), path.begin(), path.end()).first ==
             hidden.end();
    });
  };
  // bubblewrap makes the missing parents of a mount point private (0700): the sandbox's user
  // could not reach what is mounted there. They are made first, readable by all (not in a hidden
  // folder, which only its own entries are mounted back into).
  std::set<std::string> made;
  for (const auto& step : steps) {
    if (!step.mount) continue;
    fs::path parent;
    for (const auto& part : step.target.parent_path()) {
      parent /= part;
      if (parent == "/" || made.count(parent.string()) || under_system_directory(parent) ||
          in_hidden(parent))
        continue;
      made.insert(parent.string());
      add(argv, {"--perms", "0755", "--dir", parent.string()});
    }
  }
  for (const auto& step : steps) {
    if (step.mount)
      add(argv,
          {mount_option(step.mount->access), step.mount->source.string(), step.target.string()});
    else
      add(argv, {"--tmpfs", step.target.string()});
  }
  for (const auto& directory : view.directories)
    add(argv, {"--perms", "0755", "--dir", directory.string()});
  for (const auto& hidden : view.hidden) add(argv, {"--remount-ro", hidden.string()});
  add(argv, {"--chdir", "/tmp", "--"});
  if (support.mode == SandboxSupport::Mode::kRootUser && view.user) {
    add(argv, {support.setpriv.string(), "--reuid", std::to_string(view.user->uid), "--regid",
               std::to_string(view.user->gid), "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", "--"});
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

SandboxUser next_sandbox_user() {
  // 2^30 and up: far above login (1000..60000) and system users, below the 2^32-1 "no user".
  // 20 bits of the process id and 10 of a counter keep concurrent cudal1 processes apart.
  static std::atomic<std::uint32_t> counter{0};
  const std::uint32_t id = (1u << 30) +
                           ((static_cast<std::uint32_t>(::getpid()) & 0xfffffu) << 10) +
                           (counter++ & 0x3ffu);
  return {static_cast<uid_t>(id), static_cast<gid_t>(id)};
}

std::map<std::string, std::string> allowlisted_environment(
    const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = text.substr(0, eq);
    if (allowed_name(name)) out[name] = text.substr(eq + 1);
  }
  for (const auto& [name, value] : overrides) out[name] = value;
  return out;
}

}  // namespace cudal1
