// What compiled candidates depend on (Python, PyTorch, compilers, GPU architectures), probed
// once by running the worker. Its fingerprint is part of every build-cache key.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cudal1 {

struct Toolchain {
  nlohmann::json info;
  std::string fingerprint;  // SHA-256 of `info`
  bool cuda_available = false;

  // Throws std::runtime_error (with the worker's log) when the worker cannot start PyTorch.
  static Toolchain probe(const std::filesystem::path& worker,
                         const std::filesystem::path& log_file);
  // "8.0;9.0" for TORCH_CUDA_ARCH_LIST: the visible GPUs' compute capabilities.
  std::string cuda_arch_list() const;
};

}  // namespace cudal1
