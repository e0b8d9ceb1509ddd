// The devices a benchmark spreads its tasks over.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cudal1::bench {

// GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when it is set, else NVML's
// device count; nullopt when neither is known (no NVML library).
std::optional<int> visible_gpu_count();

// --device: "cpu" -> {"cpu"}; "cuda:N" -> {"cuda:N"}; "cuda:0,cuda:2" -> both; "cuda" and "auto"
// (when PyTorch sees CUDA) -> every visible GPU; "auto" without CUDA -> {"cpu"}. Throws
// InputError for anything else, or for a GPU request when PyTorch sees no CUDA device.
std::vector<std::string> bench_devices(const std::string& requested, bool cuda_available,
                                       std::optional<int> gpu_count);

// The device of `devices` with the fewest entries in `busy` (one entry per evaluation in flight
// on it); the first of them on a tie.
std::string least_loaded(const std::vector<std::string>& devices,
                         const std::vector<std::string>& busy);

}  // namespace cudal1::bench
