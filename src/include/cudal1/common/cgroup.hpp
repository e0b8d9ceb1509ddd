// Kernel limits for a sandbox and everything it starts, from cgroup v2: a directory per sandbox
// under <cgroup2 mount>/cudal1, with memory.max (tmpfs and page cache included, enforced by the
// kernel's OOM killer inside the group alone) and pids.max, and cgroup.kill to end it.
//
// Used where the v2 hierarchy delegates the memory and pids controllers to cudal1 (as root, at
// the hierarchy's root: the GPU machines here); elsewhere (the CI VM's cgroups are v1) the
// limits are rlimits and the orchestrator's checks (docs/evaluation.md, "Security model").
// Also what the cgroup and the affinity mask leave this process of the machine's cores.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cudal1 {

// Whether this machine lets cudal1 make limited cgroups, and where.
struct CgroupSupport {
  std::filesystem::path parent;  // <mount>/cudal1, with memory and pids for its children
  std::string why_unavailable;
  bool available() const { return !parent.empty(); }
  // Found once per process.
  static const CgroupSupport& probe();
};

// A cgroup v2 cpu.max text ("max 100000", "250000 100000"): its quota in cores, rounded up; none
// for no quota or text that is not one.
std::optional<unsigned> cores_of_cpu_max(std::string_view text);

// The cores this process may run on: the CPUs of its affinity mask (taskset, a container's cpuset),
// lowered to its cgroup v2 CPU quota where one is set; at least 1. std::thread::
// hardware_concurrency() counts every online CPU of the machine, which overcommits a worker pinned
// to part of it. Read once per process.
unsigned usable_cores();
// The same, read now.
unsigned count_usable_cores();

// The CPU quota this process runs under: the smallest cpu.max of its cgroup v2 and the groups
// above it, in whole cores; none where no quota is set or there is no cgroup v2 hierarchy.
std::optional<unsigned> cgroup_cpu_quota_cores();

// One sandbox's cgroup: made with its limits, killed and removed when destroyed.
class CgroupScope {
 public:
  // Throws std::system_error when the directory or a limit cannot be written.
  CgroupScope(const CgroupSupport& support, std::uint64_t memory_max, std::uint64_t pids_max);
  ~CgroupScope();
  CgroupScope(const CgroupScope&) = delete;
  CgroupScope& operator=(const CgroupScope&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The file a child writes "0" into to join (ProcessSpec::cgroup_procs).
  std::filesystem::path procs_file() const { return path_ / "cgroup.procs"; }
  // Times the kernel's OOM killer ended a process of the group (memory.events oom_kill).
  std::uint64_t oom_kills() const;
  // Memory charged to the group now (memory.current).
  std::uint64_t memory_bytes() const;
  // Every process of the group killed (cgroup.kill, or SIGKILL to each one listed).
  void kill() const;

 private:
  std::filesystem::path path_;
};

}  // namespace cudal1
