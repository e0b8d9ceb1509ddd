#include "cudal1/eval/build_artifact.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "cudal1/common/text_file.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kFolderMagic = "cudal1-build-folder-v1\n";
constexpr std::size_t kMaxManifestBytes = 16u << 20;

long long modified_ns(const struct stat& st) {
  return static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

// A name of the manifest, as a path under the target folder: relative, every part a plain name.
fs::path relative_inside(const std::string& name) {
  const fs::path path(name);
  if (name.empty() || path.is_absolute()) throw std::runtime_error("a path is empty or absolute");
  for (const auto& part : path) {
    const std::string text = part.string();
    if (text.empty() || text == "." || text == ".." || text.find('\0') != std::string::npos)
      throw std::runtime_error(fmt::format("the path '{}' leaves its folder", name));
  }
  return path;
}

void write_part(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("writing a file: {}", std::strerror(errno)));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

PackedFolder pack_folder(const fs::path& folder, std::uint64_t max_bytes) {
  struct Entry {
    std::string path;
    bool directory = false;
    std::uint64_t bytes = 0;
    long long mtime = 0;
    bool executable = false;
  };
  std::vector<Entry> entries;
  PackedFolder out;
  std::uint64_t total = 0;
  std::error_code missing;
  // A build that made nothing may have left no folder: an empty pack.
  const bool present = fs::is_directory(folder, missing);
  for (const auto& item :
       present ? fs::recursive_directory_iterator(folder) : fs::recursive_directory_iterator()) {
    struct stat st {};
    if (::lstat(item.path().c_str(), &st) != 0) continue;  // gone meanwhile
    Entry entry;
    entry.path = item.path().lexically_relative(folder).generic_string();
    if (S_ISDIR(st.st_mode)) {
      entry.directory = true;
    } else if (S_ISREG(st.st_mode)) {
      entry.bytes = static_cast<std::uint64_t>(st.st_size);
      entry.mtime = modified_ns(st);
      entry.executable = (st.st_mode & S_IXUSR) != 0;
      total += entry.bytes;
      if (total > max_bytes) {
        throw std::runtime_error(fmt::format("the build folder {} holds more than {} MiB",
                                             folder.string(), max_bytes >> 20));
      }
    } else {
      ++out.skipped;
      continue;
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  nlohmann::json manifest = nlohmann::json::array();
  std::string contents;
  contents.reserve(total);
  for (const Entry& entry : entries) {
    if (entry.directory) {
      manifest.push_back({{"path", entry.path}, {"dir", true}});
      continue;
    }
    const std::string data = read_file(folder / entry.path);
    if (data.size() != entry.bytes)
      throw std::runtime_error(fmt::format("{} changed while it was packed", entry.path));
    contents += data;
    manifest.push_back({{"path", entry.path},
                        {"bytes", entry.bytes},
                        {"mtime_ns", entry.mtime},
                        {"executable", entry.executable}});
    ++out.files;
  }
  const std::string header = manifest.dump();
  out.blob.reserve(kFolderMagic.size() + 24 + header.size() + contents.size());
  out.blob.append(kFolderMagic).append(std::to_string(header.size())).append("\n");
  out.blob.append(header).append(contents);
  return out;
}

void unpack_folder(std::string_view blob, const fs::path& folder) {
  if (blob.substr(0, kFolderMagic.size()) != kFolderMagic)
    throw std::runtime_error("not a packed build folder");
  blob.remove_prefix(kFolderMagic.size());
  const std::size_t newline = blob.find('\n');
  if (newline == std::string_view::npos || newline == 0 || newline > 12)
    throw std::runtime_error("a packed build folder without its manifest's size");
  std::size_t manifest_bytes = 0;
  for (char c : blob.substr(0, newline)) {
    if (c < '0' || c > '9')
      throw std::runtime_error("a packed build folder's size is not a number");
    manifest_bytes = manifest_bytes * 10 + static_cast<std::size_t>(c - '0');
  }
  blob.remove_prefix(newline + 1);
  if (manifest_bytes > kMaxManifestBytes || manifest_bytes > blob.size())
    throw std::runtime_error("a packed build folder's manifest is cut short");
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(blob.substr(0, manifest_bytes));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("a packed build folder's manifest: {}", e.what()));
  }
  blob.remove_prefix(manifest_bytes);
  if (!manifest.is_array()) throw std::runtime_error("a packed build folder's manifest is no list");
  if (fs::exists(fs::symlink_status(folder)))
    throw std::runtime_error(fmt::format("{} exists already", folder.string()));
  fs::create_directories(folder);
  try {
    for (const auto& entry : manifest) {
      const fs::path relative = relative_inside(entry.at("path").get<std::string>());
      const fs::path target = folder / relative;
      // Parents are folders this loop made (never links: nothing else writes here).
      fs::create_directories(target.parent_path());
      if (entry.value("dir", false)) {
        fs::create_directories(target);
        continue;
      }
      const auto bytes = entry.at("bytes").get<std::uint64_t>();
      if (bytes > blob.size()) throw std::runtime_error("a packed build folder is cut short");
      const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            entry.value("executable", false) ? 0755 : 0644);
      if (fd < 0) {
        throw std::runtime_error(
            fmt::format("cannot create {}: {}", target.string(), std::strerror(errno)));
      }
      try {
        write_part(fd, blob.substr(0, bytes));
      } catch (...) {
        ::close(fd);
        throw;
      }
      const long long mtime = entry.at("mtime_ns").get<long long>();
      const timespec times[2] = {{0, UTIME_OMIT}, {mtime / 1000000000LL, mtime % 1000000000LL}};
      const bool timed = ::futimens(fd, times) == 0;
      ::close(fd);
      if (!timed) throw std::runtime_error(fmt::format("cannot date {}", target.string()));
      blob.remove_prefix(bytes);
    }
    if (!blob.empty()) throw std::runtime_error("a packed build folder has bytes after its files");
  } catch (const nlohmann::json::exception& e) {
    std::error_code ec;
    fs::remove_all(folder, ec);
    throw std::runtime_error(fmt::format("a packed build folder's manifest: {}", e.what()));
  } catch (...) {
    std::error_code ec;
    fs::remove_all(folder, ec);
    throw;
  }
}

}  // namespace cudal1
