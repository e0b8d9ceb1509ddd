// What the orchestrator reads through NVML (libnvidia-ml, loaded at run time, in one place): the
// GPU's SM clock (samples taken while the clock had fallen far under its default are not
// trusted), the driver version, the number of GPUs and a GPU's free memory.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace cudal1 {

// The driver version NVML reports; nullopt (with `why`) when NVML cannot be loaded or started.
std::optional<std::string> nvml_driver_version(std::string& why);

// The GPUs NVML counts (all of the machine's, whatever CUDA_VISIBLE_DEVICES says); nullopt
// without NVML.
std::optional<int> nvml_device_count();

// A GPU's memory as the driver counts it (every process's allocations and contexts), in bytes.
struct GpuMemory {
  double free_bytes = 0;
  double total_bytes = 0;
};
// The memory of the GPU with the given UUID; nullopt without NVML or that GPU.
std::optional<GpuMemory> nvml_device_memory(const std::string& uuid);

class GpuClock {
 public:
  // Opens the GPU with the given UUID ("GPU-..."). Returns null and sets `why` when NVML or the
  // device is unavailable.
  static std::unique_ptr<GpuClock> open(const std::string& uuid, std::string& why);

  // Current SM clock in MHz (nullopt when the read fails).
  std::optional<unsigned> sm_mhz() const;
  // The clock samples are judged against: the default applications clock, else the maximum.
  unsigned reference_mhz() const { return reference_mhz_; }
  nlohmann::json describe() const;  // driver version, reference and max clocks

 private:
  GpuClock() = default;
  void* device_ = nullptr;
  unsigned reference_mhz_ = 0;
  unsigned max_mhz_ = 0;
  std::string driver_;
};

}  // namespace cudal1
