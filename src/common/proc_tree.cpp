#include "cudal1/common/proc_tree.hpp"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace cudal1 {

std::optional<ProcStat> read_stat(const char* pid_text) {
  std::ifstream stat(std::string("/proc/") + pid_text + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return std::nullopt;
  // Fields after the command name (which may hold spaces and parentheses) start after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  ProcStat out;
  out.pid = static_cast<pid_t>(std::atol(pid_text));
  std::string state, skip;
  fields >> state >> out.ppid;
  for (int field = 5; field <= 13; ++field) fields >> skip;
  double ticks[4] = {0, 0, 0, 0};  // fields 14-17
  for (double& t : ticks) fields >> t;
  out.cpu_ticks = ticks[0] + ticks[1] + ticks[2] + ticks[3];
  for (int field = 18; field <= 23; ++field) fields >> skip;
  fields >> out.rss_pages;  // field 24
  if (!fields) return std::nullopt;
  return out;
}

std::vector<ProcStat> process_tree(pid_t root) {
  std::map<pid_t, std::vector<ProcStat>> children;
  std::optional<ProcStat> self;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    auto stat = read_stat(entry->d_name);
    if (!stat) continue;
    if (stat->pid == root) self = stat;
    children[stat->ppid].push_back(*stat);
  }
  ::closedir(proc);
  std::vector<ProcStat> tree;
  if (!self) return tree;
  tree.push_back(*self);
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const auto it = children.find(tree[i].pid);
    if (it == children.end()) continue;
    tree.insert(tree.end(), it->second.begin(), it->second.end());
  }
  return tree;
}

}  // namespace cudal1
