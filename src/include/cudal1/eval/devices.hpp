// Device strings, and the devices that evaluations in parallel spread over. Every --device option
// (eval, bench, optimize, generate, serve, worker, doctor, the queue) is parsed here.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cudal1 {

// GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES when it is set, else NVML's
// device count; nullopt when neither is known (no NVML library).
std::optional<int> visible_gpu_count();

// What a --device option asked for.
struct DeviceRequest {
  enum class Kind {
    kAuto,  // "auto": a GPU when PyTorch sees one, else the CPU
    kCpu,   // "cpu"
    kCuda,  // "cuda": every visible GPU, or the first for a single evaluation
    kList,  // "cuda:N", or a list "cuda:0,cuda:2"
  };
  Kind kind = Kind::kAuto;
  std::vector<int> indices;  // kList: the GPUs named, in order, each once
};

// Parses auto, cpu, cuda, cuda:N and, where `lists` is true, cuda:N,cuda:M,... Throws InputError
// naming the accepted forms for anything else.
DeviceRequest parse_device_request(const std::string& text, bool lists);

// The device of a single evaluation: "cpu", "cuda:N" ("cuda" is "cuda:0"), or "auto" until the
// toolchain says whether PyTorch sees CUDA. Throws InputError as parse_device_request.
std::string single_device(const std::string& text);

// "cpu" or "cuda": the kind of device a device string names (a queue's job stream, a prompt).
std::string device_kind(const std::string& device);

// --device: "cpu" -> {"cpu"}; "cuda:N" -> {"cuda:N"}; "cuda:0,cuda:2" -> both; "cuda" and "auto"
// (when PyTorch sees CUDA) -> every visible GPU; "auto" without CUDA -> {"cpu"}. Throws
// InputError for anything else, or for a GPU request when PyTorch sees no CUDA device.
std::vector<std::string> resolve_devices(const std::string& requested, bool cuda_available,
                                         std::optional<int> gpu_count);

// The device of `devices` with the fewest entries in `busy` (one entry per evaluation in flight
// on it); the first of them on a tie.
std::string least_loaded(const std::vector<std::string>& devices,
                         const std::vector<std::string>& busy);

// Evaluations in flight per device, shared by everything that evaluates at once (the tasks of a
// suite, the requests of a reward server), so each new evaluation goes to the least busy device.
// With an affinity slack, an evaluation that names its task goes instead to the device where
// that task's evaluations are (the most in flight, else the one it used last), while that device
// has at most `slack` more in flight than the least busy: a task's kept reference workers are
// per device, so its evaluations spread over every GPU find few to take.
class DeviceLoad {
 public:
  // One evaluation on the chosen device, `device()`, until the lease is destroyed; `task` (may
  // be empty: none) is what the affinity goes by.
  class Lease {
   public:
    explicit Lease(DeviceLoad& load, const std::string& task = {});
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    const std::string& device() const { return device_; }

   private:
    DeviceLoad& load_;
    std::string task_;
    std::string device_;
  };

  // Throws std::invalid_argument for an empty list. `slack` 0: always the least busy device.
  explicit DeviceLoad(std::vector<std::string> devices, std::size_t slack = 0);
  const std::vector<std::string>& devices() const { return devices_; }

 private:
  std::string choose(const std::string& task) const;  // under mutex_

  struct Held {
    std::string device;
    std::string task;
  };

  std::vector<std::string> devices_;
  std::size_t slack_;
  std::mutex mutex_;
  std::vector<Held> held_;                          // one entry per lease
  std::map<std::string, std::string> last_device_;  // per task
};

}  // namespace cudal1
