// What compiled candidates depend on (Python, PyTorch, compilers, GPU architectures), probed
// by running the worker (a PyTorch import: seconds). Its fingerprint is part of every build-cache
// key. The probe's answer is stored in the cache directory and reused while nothing it came from
// changed: see Toolchain::stamp.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cudal1 {

struct Toolchain {
  nlohmann::json info;
  std::string fingerprint;  // SHA-256 of `info` without its "depends_on" list
  bool cuda_available = false;
  bool from_cache = false;  // reused from toolchain.json rather than probed now

  // The toolchain a probe answered with `info` (a worker's report, here or on another host).
  static Toolchain from_info(nlohmann::json info);
  // Throws std::runtime_error (with the worker's log) when the worker cannot start PyTorch.
  static Toolchain probe(const std::filesystem::path& worker,
                         const std::filesystem::path& log_file);
  // The stored answer in CACHE_DIR/toolchain.json when its stamp still matches and it is under
  // max_age_s old; otherwise a new probe, stored for next time. CUDAL1_TOOLCHAIN_CACHE=off in the
  // environment always probes.
  static Toolchain load_or_probe(const std::filesystem::path& worker,
                                 const std::filesystem::path& cache_dir,
                                 double max_age_s = 24 * 3600);
  // What the answer depends on beyond the worker's own report: the worker binary, every file in
  // info["depends_on"] (size and modification time), the environment variables that choose
  // Python, PyTorch, compilers and GPUs, the kernel release, the NVIDIA driver and device nodes.
  static nlohmann::json stamp(const std::filesystem::path& worker, const nlohmann::json& info);
  // "8.0;9.0" for TORCH_CUDA_ARCH_LIST: the visible GPUs' compute capabilities.
  std::string cuda_arch_list() const;
};

}  // namespace cudal1
