// The processes below a process, from /proc: what killing, pausing and limiting a worker walk
// (the orchestrator's ChildProcess, the zygote's forks). In cudal1_wire, which the worker links.
#pragma once

#include <sys/types.h>

#include <chrono>
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

// `root` and every process below it (root first, then by depth): from the children the kernel
// lists for each of their threads (/proc/PID/task/TID/children) where it does, which reads only
// the tree's own processes; else by parent links from a reading of all of /proc.
std::vector<ProcStat> process_tree(pid_t root);

// The same by reading every process of /proc (what process_tree falls back to).
std::vector<ProcStat> scanned_process_tree(pid_t root);

// For measuring many workers' memory and CPU every 100 ms: with the kernel's children lists, a
// fresh walk each time (a few reads per worker); without them, one reading of /proc shared by
// every caller of this process for `max_age` (one scan of /proc per worker and check made the
// orchestrator of 64 workers in flight use 2.4 cores, and a scan takes about 16 ms beside 1,000
// processes). Killing and pausing always walk anew (process_tree).
std::vector<ProcStat> recent_process_tree(pid_t root, std::chrono::milliseconds max_age);

}  // namespace cudal1
