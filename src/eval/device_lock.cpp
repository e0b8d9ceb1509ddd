#include "cudal1/eval/device_lock.hpp"

#include <cctype>
#include <thread>

namespace cudal1 {

std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id) {
  std::string name = "device-";
  for (char c : device_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return lock_dir / (name + ".lock");
}

std::filesystem::path device_turnstile_path(const std::filesystem::path& lock_path) {
  auto turnstile = lock_path;
  turnstile.replace_extension(".turnstile");
  return turnstile;
}

FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id,
                     DeviceUse use, std::chrono::milliseconds let_through_every) {
  using Clock = std::chrono::steady_clock;
  const auto path = device_lock_path(lock_dir, device_id);
  const auto turnstile_path = device_turnstile_path(path);
  // Held while waiting for the device, released once it is held: whoever waits for exclusive
  // use keeps new shared users out until it has had its turn.
  if (use == DeviceUse::kShared) {
    FileLock turnstile = FileLock::acquire(turnstile_path, /*shared_between_users=*/true);
    return FileLock::acquire_shared(path, true);
  }
  // Exclusive requests queue here first, so that when the one at the turnstile opens it for a
  // moment (below) only shared users pass, not another exclusive request.
  auto queue_path = path;
  queue_path.replace_extension(".queue");
  FileLock queue = FileLock::acquire(queue_path, true);
  FileLock turnstile = FileLock::acquire(turnstile_path, true);
  // Only in the first half minute of the wait: shared users let through in turn could otherwise
  // keep the device shared for ever.
  constexpr auto kLetThroughFor = std::chrono::seconds(30);
  const auto arrived = Clock::now();
  auto opened = arrived;
  for (;;) {
    if (auto held = FileLock::try_acquire(path, true)) return std::move(*held);
    // Held shared, not for timing: shared users waiting at the turnstile pass now (they take
    // their hold at once, beside the one in place); then this request takes its place at the
    // turnstile again.
    const auto now = Clock::now();
    if (now - arrived < kLetThroughFor && now - opened >= let_through_every &&
        FileLock::try_acquire_shared(path, true)) {
      turnstile.release();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      turnstile = FileLock::acquire(turnstile_path, true);
      opened = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace cudal1
