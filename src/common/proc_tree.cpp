#include "cudal1/common/proc_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace cudal1 {

namespace {

struct Snapshot {
  std::chrono::steady_clock::time_point taken;
  std::unordered_map<pid_t, ProcStat> by_pid;
  std::unordered_map<pid_t, std::vector<pid_t>> children;
};

Snapshot scan() {
  Snapshot out;
  out.taken = std::chrono::steady_clock::now();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    auto stat = read_stat(entry->d_name);
    if (!stat) continue;
    out.children[stat->ppid].push_back(stat->pid);
    out.by_pid.emplace(stat->pid, *stat);
  }
  ::closedir(proc);
  return out;
}

std::vector<ProcStat> tree_of(const Snapshot& snapshot, pid_t root) {
  std::vector<ProcStat> tree;
  const auto self = snapshot.by_pid.find(root);
  if (self == snapshot.by_pid.end()) return tree;
  tree.push_back(self->second);
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const auto it = snapshot.children.find(tree[i].pid);
    if (it == snapshot.children.end()) continue;
    for (const pid_t child : it->second) tree.push_back(snapshot.by_pid.at(child));
  }
  return tree;
}

}  // namespace

std::optional<ProcStat> read_stat(const char* pid_text) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid_text);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[1024];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  // Fields after the command name (which may hold spaces and parentheses) start after the last ')'.
  const char* close = std::strrchr(text, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0') return std::nullopt;
  // Field 3 (the state) is one character; the numbers from field 4 on are read in turn.
  const char* cursor = close + 4;
  long long fields[21] = {};  // fields 4 to 24
  for (long long& field : fields) {
    char* end = nullptr;
    field = std::strtoll(cursor, &end, 10);
    if (end == cursor) return std::nullopt;
    cursor = end;
  }
  ProcStat out;
  out.pid = static_cast<pid_t>(std::atol(pid_text));
  out.ppid = static_cast<pid_t>(fields[0]);
  // utime, stime, cutime, cstime: fields 14 to 17.
  out.cpu_ticks = static_cast<double>(fields[10] + fields[11] + fields[12] + fields[13]);
  out.rss_pages = static_cast<long>(fields[20]);  // field 24
  return out;
}

std::vector<ProcStat> process_tree(pid_t root) {
  return tree_of(scan(), root);
}

std::vector<ProcStat> recent_process_tree(pid_t root, std::chrono::milliseconds max_age) {
  static std::mutex mutex;
  static std::shared_ptr<const Snapshot> last;
  std::shared_ptr<const Snapshot> snapshot;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!last || std::chrono::steady_clock::now() - last->taken >= max_age)
      last = std::make_shared<const Snapshot>(scan());
    snapshot = last;
  }
  return tree_of(*snapshot, root);
}

}  // namespace cudal1
