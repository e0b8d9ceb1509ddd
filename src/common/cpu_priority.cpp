#include "cudal1/common/cpu_priority.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <string>

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
