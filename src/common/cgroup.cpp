#include "cudal1/common/cgroup.hpp"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// cgroup files take one write(2) each; an error (EBUSY, EINVAL) is the kernel's answer.
bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

bool lists(const std::string& words, const std::string& word) {
  std::istringstream in(words);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

// The cgroup2 mount point, from /proc/self/mountinfo ("... - cgroup2 cgroup2 rw,...").
fs::path cgroup2_mount() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string type;
    tail >> type;
    if (type != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, device, root, mount_point;
    head >> id >> parent >> device >> root >> mount_point;
    if (root == "/") return mount_point;
  }
  return {};
}

std::optional<unsigned long long> number_of(std::string_view text) {
  unsigned long long value = 0;
  const auto* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || at != end) return std::nullopt;
  return value;
}

unsigned affinity_cores() {
  // Masks of up to 16384 CPUs; a machine with more keeps the online count.
  for (std::size_t cpus = 1024; cpus <= 16384; cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) break;
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    const int got = ::sched_getaffinity(0, size, set);
    const int count = got == 0 ? CPU_COUNT_S(size, set) : 0;
    const int error = errno;
    CPU_FREE(set);
    if (got == 0) return count > 0 ? static_cast<unsigned>(count) : 1u;
    if (error != EINVAL) break;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

CgroupSupport find_cgroup_support() {
  CgroupSupport support;
  if (::geteuid() != 0) {
    support.why_unavailable = "not root: cgroups are not delegated to this user";
    return support;
  }
  const fs::path mount = cgroup2_mount();
  if (mount.empty()) {
    support.why_unavailable = "no cgroup v2 hierarchy is mounted";
    return support;
  }
  const std::string controllers = read_text(mount / "cgroup.controllers");
  if (!lists(controllers, "memory") || !lists(controllers, "pids")) {
    support.why_unavailable = "the cgroup v2 hierarchy at " + mount.string() +
                              " has no memory and pids controllers (they are on v1 here)";
    return support;
  }
  // Children of the hierarchy's root get the controllers the root enables; the root may hold
  // processes and still enable them, other groups may not.
  for (const char* controller : {"memory", "pids"}) {
    if (lists(read_text(mount / "cgroup.subtree_control"), controller)) continue;
    if (!write_text(mount / "cgroup.subtree_control", std::string("+") + controller)) {
      support.why_unavailable = "cannot enable " + std::string(controller) + " in " +
                                (mount / "cgroup.subtree_control").string();
      return support;
    }
  }
  const fs::path parent = mount / "cudal1";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec || !write_text(parent / "cgroup.subtree_control", "+memory +pids")) {
    support.why_unavailable = "cannot make " + parent.string() + " with memory and pids";
    return support;
  }
  support.parent = parent;
  return support;
}

}  // namespace

std::optional<unsigned> cores_of_cpu_max(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto quota = number_of(text.substr(0, space));
  const auto period = number_of(text.substr(space + 1));
  if (!quota || !period || *period == 0 || *quota == 0) return std::nullopt;
  const unsigned long long cores = (*quota + *period - 1) / *period;
  return static_cast<unsigned>(std::min<unsigned long long>(cores, 1u << 20));
}

std::optional<unsigned> cgroup_cpu_quota_cores() {
  const fs::path mount = cgroup2_mount();
  if (mount.empty()) return std::nullopt;
  // The unified hierarchy's line of /proc/self/cgroup: "0::/path", below the mount's root.
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroups, line)) {
    if (line.rfind("0::/", 0) == 0) path = line.substr(4);
  }
  std::optional<unsigned> cores;
  for (fs::path folder = path.empty() ? mount : mount / path;; folder = folder.parent_path()) {
    if (const auto quota = cores_of_cpu_max(read_text(folder / "cpu.max")))
      cores = std::min(cores.value_or(*quota), *quota);
    if (folder == mount || folder.parent_path() == folder) break;
  }
  return cores;
}

unsigned count_usable_cores() {
  const unsigned affinity = affinity_cores();
  const auto quota = cgroup_cpu_quota_cores();
  return std::max(1u, quota ? std::min(affinity, *quota) : affinity);
}

unsigned usable_cores() {
  static const unsigned cores = count_usable_cores();
  return cores;
}

const CgroupSupport& CgroupSupport::probe() {
  static const CgroupSupport support = find_cgroup_support();
  return support;
}

CgroupScope::CgroupScope(const CgroupSupport& support, std::uint64_t memory_max,
                         std::uint64_t pids_max) {
  static std::atomic<unsigned> counter{0};
  path_ =
      support.parent / ("sandbox-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  fs::create_directory(path_, ec);
  if (ec) throw std::system_error(ec, "create " + path_.string());
  const auto set = [&](const char* file, const std::string& value) {
    if (!write_text(path_ / file, value))
      throw std::system_error(errno, std::generic_category(),
                              "write " + value + " to " + (path_ / file).string());
  };
  set("memory.max", std::to_string(memory_max));
  set("pids.max", std::to_string(pids_max));
  // Memory moved out to swap would escape memory.max; not every kernel has swap accounting.
  write_text(path_ / "memory.swap.max", "0");
}

CgroupScope::~CgroupScope() {
  kill();
  // The group can be removed once the kernel has taken its last process away.
  for (int attempt = 0; attempt < 200; ++attempt) {
    std::error_code ec;
    if (fs::remove(path_, ec) || !fs::exists(path_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::uint64_t CgroupScope::oom_kills() const {
  std::istringstream events(read_text(path_ / "memory.events"));
  std::string key;
  std::uint64_t value = 0;
  while (events >> key >> value)
    if (key == "oom_kill") return value;
  return 0;
}

std::uint64_t CgroupScope::memory_bytes() const {
  const std::string text = read_text(path_ / "memory.current");
  return text.empty() ? 0 : std::stoull(text);
}

void CgroupScope::kill() const {
  if (write_text(path_ / "cgroup.kill", "1")) return;
  // Kernels before 5.14 have no cgroup.kill.
  std::istringstream procs(read_text(path_ / "cgroup.procs"));
  pid_t pid = 0;
  while (procs >> pid) ::kill(pid, SIGKILL);
}

}  // namespace cudal1
