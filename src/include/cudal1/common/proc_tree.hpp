// The processes below a process, from /proc: what killing, pausing and limiting a worker walk
// (the orchestrator's ChildProcess, the zygote's forks). In cudal1_wire, which the worker links.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace cudal1 {

// One line of /proc/PID/stat: the fields the tree walks need.
struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  double cpu_ticks = 0;  // utime + stime + cutime + cstime
  long rss_pages = 0;
};

// /proc/PID/stat of `pid_text` (a /proc entry's name); null when it is gone or unreadable.
std::optional<ProcStat> read_stat(const char* pid_text);

// `root` and every process below it, by parent links read from /proc (root first, then by depth).
std::vector<ProcStat> process_tree(pid_t root);

}  // namespace cudal1
