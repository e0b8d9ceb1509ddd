#include "cudal1/eval/device_lock.hpp"

#include <cctype>

namespace cudal1 {

std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id) {
  std::string name = "device-";
  for (char c : device_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return lock_dir / (name + ".lock");
}

FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id) {
  return FileLock::acquire(device_lock_path(lock_dir, device_id), /*shared_between_users=*/true);
}

}  // namespace cudal1
