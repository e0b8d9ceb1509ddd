#include "cudal1/common/cpu_priority.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace cudal1 {
namespace {

constexpr char kAutogroup[] = "/proc/self/autogroup";

}  // namespace

void lower_cpu_priority(int nice) {
  if (nice <= 0 || nice > 19) return;
  (void)::setpriority(PRIO_PROCESS, 0, nice);
  char text[4];
  int length = 0;
  if (nice >= 10) text[length++] = static_cast<char>('0' + nice / 10);
  text[length++] = static_cast<char>('0' + nice % 10);
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) {
      const timespec pause{0, 110'000'000};
      ::nanosleep(&pause, nullptr);
    }
    const int fd = ::open(kAutogroup, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;  // no autogroups, or not ours to change
    const ssize_t written = ::write(fd, text, static_cast<std::size_t>(length));
    const int error = errno;
    ::close(fd);
    if (written == length || error != EAGAIN) return;
  }
}

std::optional<int> autogroup_nice() {
  // "/autogroup-123 nice 10"
  std::ifstream group(kAutogroup);
  std::string name, word;
  int value = 0;
  if (!(group >> name >> word >> value) || word != "nice") return std::nullopt;
  return value;
}

}  // namespace cudal1

namespace cudal1 {
namespace {

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

// The smallest quota of this process's cgroup v2 and its ancestors' (the unified hierarchy's
// "0::/path" line of /proc/self/cgroup, mounted at /sys/fs/cgroup).
std::optional<unsigned> quota_cores() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroups, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::optional<unsigned> cores;
  std::filesystem::path folder = std::filesystem::path("/sys/fs/cgroup") / path.substr(1);
  for (int depth = 0; depth < 64; ++depth) {
    std::ifstream file(folder / "cpu.max");
    std::string text;
    if (file && std::getline(file, text)) {
      if (const auto quota = cores_of_cpu_max(text))
        cores = std::min(cores.value_or(*quota), *quota);
    }
    if (folder == "/sys/fs/cgroup" || !folder.has_parent_path()) break;
    folder = folder.parent_path();
  }
  return cores;
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

unsigned count_usable_cores() {
  const unsigned affinity = affinity_cores();
  const auto quota = quota_cores();
  return std::max(1u, quota ? std::min(affinity, *quota) : affinity);
}

unsigned usable_cores() {
  static const unsigned cores = count_usable_cores();
  return cores;
}

}  // namespace cudal1
