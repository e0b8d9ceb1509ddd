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

FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id,
                     DeviceUse use) {
  const auto path = device_lock_path(lock_dir, device_id);
  auto turnstile_path = path;
  turnstile_path.replace_extension(".turnstile");
  // Held while waiting for the device, released once it is held: whoever waits for exclusive
  // use keeps new shared users out until it has had its turn.
  FileLock turnstile = FileLock::acquire(turnstile_path, /*shared_between_users=*/true);
  return use == DeviceUse::kExclusive ? FileLock::acquire(path, true)
                                      : FileLock::acquire_shared(path, true);
}

}  // namespace cudal1
