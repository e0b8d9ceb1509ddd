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
#include <unordered_set>

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

// Where the kernel lists each task's children (CONFIG_PROC_CHILDREN, which Debian's and Ubuntu's
// kernels have): a tree is then read from its own processes, not from every process of the host.
bool children_listed() {
  static const bool listed = ::access("/proc/thread-self/children", R_OK) == 0;
  return listed;
}

std::optional<ProcStat> stat_of(pid_t pid) {
  char text[24];
  std::snprintf(text, sizeof text, "%d", static_cast<int>(pid));
  return read_stat(text);
}

// The children of every thread of `pid` (a child is listed under the thread that made it).
void append_children(pid_t pid, std::vector<pid_t>& out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task", static_cast<int>(pid));
  DIR* tasks = ::opendir(path);
  if (tasks == nullptr) return;  // gone
  while (dirent* task = ::readdir(tasks)) {
    if (task->d_name[0] < '0' || task->d_name[0] > '9') continue;
    char file[320];
    std::snprintf(file, sizeof file, "/proc/%d/task/%s/children", static_cast<int>(pid),
                  task->d_name);
    const int fd = ::open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text;
    char chunk[4096];
    for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) text.append(chunk, n);
    ::close(fd);
    const char* cursor = text.c_str();
    for (char* end = nullptr;; cursor = end) {
      const long child = std::strtol(cursor, &end, 10);
      if (end == cursor) break;
      out.push_back(static_cast<pid_t>(child));
    }
  }
  ::closedir(tasks);
}

std::vector<ProcStat> tree_from_children(pid_t root) {
  std::vector<ProcStat> tree;
  const auto self = stat_of(root);
  if (!self) return tree;
  tree.push_back(*self);
  std::unordered_set<pid_t> seen = {root};
  std::vector<pid_t> children;
  for (std::size_t i = 0; i < tree.size(); ++i) {
    children.clear();
    append_children(tree[i].pid, children);
    for (const pid_t child : children) {
      if (!seen.insert(child).second) continue;
      // One that ended meanwhile is left out, as a scan would, and so is a process that took
      // its pid since (its parent is another).
      if (auto stat = stat_of(child); stat && stat->ppid == tree[i].pid) tree.push_back(*stat);
    }
  }
  return tree;
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
  return children_listed() ? tree_from_children(root) : scanned_process_tree(root);
}

std::vector<ProcStat> scanned_process_tree(pid_t root) {
  return tree_of(scan(), root);
}

std::vector<ProcStat> recent_process_tree(pid_t root, std::chrono::milliseconds max_age) {
  // A walk of the tree's own processes costs a few reads: every reading is a fresh one.
  if (children_listed()) return process_tree(root);
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
