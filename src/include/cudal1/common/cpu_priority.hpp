// A lower CPU priority for a process and the processes it starts (builds: nvcc, ninja).
#pragma once

#include <optional>

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

}  // namespace cudal1
