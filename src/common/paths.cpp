#include "cudal1/common/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>
#include <vector>

namespace cudal1 {
namespace {

std::filesystem::path from_environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::filesystem::path(value)
                                            : std::filesystem::path();
}

}  // namespace

std::filesystem::path default_worker_path() {
  if (auto path = from_environment("CUDAL1_WORKER"); !path.empty()) return path;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "cudal1-worker";
  return self.parent_path() / "cudal1-worker";
}

std::filesystem::path default_cache_dir() {
  if (auto path = from_environment("CUDAL1_CACHE_DIR"); !path.empty()) return path;
  if (auto path = from_environment("XDG_CACHE_HOME"); !path.empty()) return path / "cudal1";
  if (auto path = from_environment("HOME"); !path.empty()) return path / ".cache" / "cudal1";
  return std::filesystem::temp_directory_path() / "cudal1-cache";
}

std::filesystem::path default_lock_dir() {
  if (auto path = from_environment("CUDAL1_LOCK_DIR"); !path.empty()) return path;
  return "/tmp/cudal1-locks";
}

std::filesystem::path make_private_directory(const std::filesystem::path& parent,
                                             const std::string& prefix) {
  std::filesystem::create_directories(parent);
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(),
                            "create directory under " + parent.string());
  }
  return std::filesystem::path(buffer.data());
}

void copy_folder_keeping_times(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::remove_all(to);
  copy_into_folder_keeping_times(from, to);
}

void copy_into_folder_keeping_times(const std::filesystem::path& from,
                                    const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    // Lexically: fs::relative resolves a link, so a link to somewhere else would have named a
    // target outside `to` (and the copy, made by the orchestrator, have created a link there).
    const fs::path target = to / entry.path().lexically_relative(from);
    const auto status = entry.symlink_status();
    if (fs::is_symlink(status)) {
      fs::copy_symlink(entry.path(), target);
    } else if (fs::is_directory(status)) {
      fs::create_directories(target);
    } else if (fs::is_regular_file(status)) {
      fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing);
      fs::last_write_time(target, fs::last_write_time(entry.path()));
    }
  }
}

}  // namespace cudal1
