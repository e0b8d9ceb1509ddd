// Exclusive use of a device for a timing phase, across threads and processes.
#pragma once

#include <filesystem>
#include <string>

#include "cudal1/common/file_lock.hpp"

namespace cudal1 {

// `device_id` names the physical device ("cpu", or a GPU's UUID so that two processes with
// different CUDA_VISIBLE_DEVICES still share one lock per GPU).
std::filesystem::path device_lock_path(const std::filesystem::path& lock_dir,
                                       const std::string& device_id);
FileLock lock_device(const std::filesystem::path& lock_dir, const std::string& device_id);

}  // namespace cudal1
