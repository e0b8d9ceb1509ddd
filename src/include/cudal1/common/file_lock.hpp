// An advisory lock on a file (flock), held for the lifetime of the object: exclusive, or shared
// with other shared holders. It excludes other processes and other threads of this process alike
// (each lock opens its own file).
#pragma once

#include <filesystem>
#include <optional>

namespace cudal1 {

class FileLock {
 public:
  // Blocks until the lock is held; creates the file (and its directory) when missing.
  // `shared_between_users` makes the directory and file writable by everyone: a lock another
  // user cannot take excludes nobody.
  static FileLock acquire(const std::filesystem::path& path, bool shared_between_users = false);
  // The same, held together with other shared holders and excluding exclusive ones.
  static FileLock acquire_shared(const std::filesystem::path& path,
                                 bool shared_between_users = false);
  // Without waiting: nullopt when the lock is held in a way that excludes this one.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path,
                                             bool shared_between_users = false);
  static std::optional<FileLock> try_acquire_shared(const std::filesystem::path& path,
                                                    bool shared_between_users = false);
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::filesystem::path& path() const { return path_; }
  void release();

 private:
  FileLock(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Null when `operation` has LOCK_NB and someone else holds the lock.
  static std::optional<FileLock> take(const std::filesystem::path& path, bool shared_between_users,
                                      int operation);
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace cudal1
