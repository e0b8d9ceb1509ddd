// The devices a benchmark spreads its tasks over.
#pragma once

#include <mutex>
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

// Evaluations in flight per device, shared by everything that evaluates at once (the tasks of a
// suite, the requests of a reward server), so each new evaluation goes to the least busy device.
class DeviceLoad {
 public:
  // One evaluation on the least busy device, `device()`, until the lease is destroyed.
  class Lease {
   public:
    explicit Lease(DeviceLoad& load);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    const std::string& device() const { return device_; }

   private:
    DeviceLoad& load_;
    std::string device_;
  };

  // Throws std::invalid_argument for an empty list.
  explicit DeviceLoad(std::vector<std::string> devices);
  const std::vector<std::string>& devices() const { return devices_; }

 private:
  std::vector<std::string> devices_;
  std::mutex mutex_;
  std::vector<std::string> busy_;  // one entry per lease
};

}  // namespace cudal1::bench
