// Kernel limits for a sandbox and everything it starts, from cgroup v2: a directory per sandbox
// under <cgroup2 mount>/cudal1, with memory.max (tmpfs and page cache included, enforced by the
// kernel's OOM killer inside the group alone) and pids.max, and cgroup.kill to end it.
//
// Used where the v2 hierarchy delegates the memory and pids controllers to cudal1 (as root, at
// the hierarchy's root: the GPU machines here); elsewhere (the CI VM's cgroups are v1) the
// limits are rlimits and the orchestrator's checks (docs/evaluation.md, "Security model").
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace cudal1 {

// Whether this machine lets cudal1 make limited cgroups, and where.
struct CgroupSupport {
  std::filesystem::path parent;  // <mount>/cudal1, with memory and pids for its children
  std::string why_unavailable;
  bool available() const { return !parent.empty(); }
  // Found once per process.
  static const CgroupSupport& probe();
};

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
