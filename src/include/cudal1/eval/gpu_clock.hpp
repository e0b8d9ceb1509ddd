// The GPU's SM clock, read by the orchestrator through NVML (libnvidia-ml loaded at run time):
// samples taken while the clock had fallen far under its default are not trusted.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace cudal1 {

// The driver version NVML reports; nullopt (with `why`) when NVML cannot be loaded or started.
std::optional<std::string> nvml_driver_version(std::string& why);

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
