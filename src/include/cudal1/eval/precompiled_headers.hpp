// PyTorch's extension header (torch/extension.h), precompiled once per toolchain for the
// candidates' builds: load_inline's main.cpp spends half its CPU time parsing it. The file is made
// by a trusted process of its own (`cudal1-worker pch DIR`: no candidate code), seen read-only by
// builds, and offered to every build and load of the toolchain through one include directory
// that is there whether or not the file is made yet, so it never changes a build's flags. GCC
// uses it where the flags that matter are the same and parses the header otherwise.
#pragma once

#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

namespace cudal1 {

// When the file is made (CUDAL1_PCH): kAuto from the second build a process compiles (bench,
// serve, optimize: many builds; a lone `cudal1 eval` pays nothing), in the background, builds
// using it once it is there; kOn before the first build, which waits for it; kOff never.
enum class PchPolicy { kAuto, kOn, kOff };

// CUDAL1_PCH's value (auto when unset); an InputError names the values allowed.
PchPolicy pch_policy_from(const char* value);
const char* pch_policy_name(PchPolicy policy);

// How a load_inline build's CUDA sources include torch/extension.h (CUDAL1_CUDA_HEADERS): kFull,
// the default, as written; kLight with PyTorch's pybind header in its place first, and as written
// where cuda.cu then fails to compile (src/worker/python/extension_builds.py: nvcc parses the
// whole C++ frontend three times). Off by default until measured on a GPU host as it is now.
enum class CudaHeaders { kFull, kLight };

// CUDAL1_CUDA_HEADERS's value (full when unset); an InputError names the values allowed.
CudaHeaders cuda_headers_from(const char* value);

class PrecompiledHeaders {
 public:
  // `root`: the build cache's pch/ folder; `worker`: the cudal1-worker that makes the file.
  PrecompiledHeaders(std::filesystem::path root, std::filesystem::path worker, PchPolicy policy);
  ~PrecompiledHeaders();  // stops a file still being made (what it wrote is removed)
  PrecompiledHeaders(const PrecompiledHeaders&) = delete;
  PrecompiledHeaders& operator=(const PrecompiledHeaders&) = delete;

  const std::filesystem::path& root() const { return root_; }
  // The folder of this toolchain's file (a function of the fingerprint only), under root().
  std::string folder_name(const std::string& toolchain_fingerprint) const;
  std::filesystem::path folder(const std::string& toolchain_fingerprint) const;
  bool ready(const std::string& toolchain_fingerprint) const;

  // Before a build that compiles: starts making the file per the policy (on: waits for it).
  // Returns what the verdict's phases record: the policy, whether the file was ready for this
  // build, and why it is not where making it failed.
  nlohmann::json before_build(const std::string& toolchain_fingerprint);

 private:
  void make(const std::string& toolchain_fingerprint);  // under the folder's lock

  std::filesystem::path root_;
  std::filesystem::path worker_;
  PchPolicy policy_;
  std::mutex mutex_;
  int builds_ = 0;
  bool started_ = false;
  std::thread maker_;
  std::atomic<bool> stopping_{false};  // the destructor's word to a maker still running
};

}  // namespace cudal1
