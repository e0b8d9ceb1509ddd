// A lower CPU priority for a process and the processes it starts (builds: nvcc, ninja), and the
// cores a process may use.
#pragma once

#include <optional>
#include <string_view>

namespace cudal1 {

// Sets the calling process's nice value to `nice` (1 to 19), and that of its
// autogroup too: where the kernel groups the processes of a session (autogroups, on by default on
// many distributions), a nice value ranks a process only among its own session's, so a process
// that leads a session of its own would otherwise get a full share against every other session.
// Call it after setsid() and before dropping privileges (the group's file becomes root's once
// the process changes user). Best effort: without CAP_SYS_ADMIN the kernel takes one autogroup
// change per 100 ms on the whole host, so it tries three times. Async-signal-safe: a fork's child
// may call it.
void lower_cpu_priority(int nice);

// The nice value of the calling process's autogroup ("/autogroup-N nice V"), none where the
// kernel has no autogroups.
std::optional<int> autogroup_nice();

// The cores this process may run on: the CPUs of its affinity mask (taskset, a container's cpuset),
// lowered to its cgroup v2 CPU quota (cpu.max of its cgroup or an ancestor, rounded up) where one
// is set; at least 1. std::thread::hardware_concurrency() counts every online CPU of the machine,
// which overcommits a worker pinned to part of it. Read once per process.
unsigned usable_cores();
// The same, read now.
unsigned count_usable_cores();

// A cgroup v2 cpu.max text ("max 100000", "250000 100000"): its quota in cores, rounded up; none
// for no quota or text that is not one.
std::optional<unsigned> cores_of_cpu_max(std::string_view text);

}  // namespace cudal1
