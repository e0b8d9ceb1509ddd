// Use of a device across threads and processes: exclusive for timing, shared for work that only
// must not overlap a timing phase (correctness trials).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "cudal1/common/file_lock.hpp"

namespace cudal1 {

// `device_id` names the physical device ("cpu", or a GPU's UUID so that two processes with
// different CUDA_VISIBLE_DEVICES still share one lock per GPU).
std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id);

// The turnstile beside a device lock (see lock_device): whoever takes the lock shared passes it
// first. Workers that hold the device themselves take the same two.
std::filesystem::path device_turnstile_path(const std::filesystem::path& lock_path);

enum class DeviceUse {
  kExclusive,  // nothing else runs on the device: timing
  kShared,     // alongside other shared users, never alongside an exclusive one
};

// Blocks until the device is held for `use`. Fair between the two kinds: a request waiting for
// exclusive use holds a turnstile that later requests of either kind must pass, so a stream of
// shared users cannot keep a timing phase waiting for ever. While a shared hold already in place
// keeps it waiting, it opens the turnstile for a moment every `let_through_every` during the
// first 30 s of its wait: the shared
// users queued behind it run beside that hold instead of after the timing phase (a compilation
// inside a first call holds the device shared for tens of seconds; what runs beside it costs the
// waiting phase little); exclusive requests come to the turnstile one at a time, so no other one
// passes meanwhile. Never upgrade: release a shared hold before asking for exclusive use.
FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id,
                     DeviceUse use = DeviceUse::kExclusive,
                     std::chrono::milliseconds let_through_every = std::chrono::seconds(2));

}  // namespace cudal1
