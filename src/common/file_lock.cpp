#include "cudal1/common/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace cudal1 {

FileLock FileLock::acquire(const std::filesystem::path& path, bool shared_between_users) {
  return std::move(*take(path, shared_between_users, LOCK_EX));
}

FileLock FileLock::acquire_shared(const std::filesystem::path& path, bool shared_between_users) {
  return std::move(*take(path, shared_between_users, LOCK_SH));
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path,
                                              bool shared_between_users) {
  return take(path, shared_between_users, LOCK_EX | LOCK_NB);
}

std::optional<FileLock> FileLock::try_acquire_shared(const std::filesystem::path& path,
                                                     bool shared_between_users) {
  return take(path, shared_between_users, LOCK_SH | LOCK_NB);
}

std::optional<FileLock> FileLock::take(const std::filesystem::path& path,
                                       bool shared_between_users, int operation) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (shared_between_users) ::chmod(path.parent_path().c_str(), 01777);
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, shared_between_users ? 0666 : 0600);
  if (fd < 0)
    throw std::system_error(errno, std::generic_category(), "open lock file " + path.string());
  if (shared_between_users) ::fchmod(fd, 0666);
  while (::flock(fd, operation) != 0) {
    if (errno == EWOULDBLOCK && (operation & LOCK_NB)) {
      ::close(fd);
      return std::nullopt;
    }
    if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      throw std::system_error(error, std::generic_category(), "lock " + path.string());
    }
  }
  return FileLock(path, fd);
}

FileLock::FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  release();
}

void FileLock::release() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace cudal1
