// One timed call of a model, measured the same way on both sides of a comparison.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace cudal1::worker {

// A device error after which the process's CUDA context is unusable.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SampleResult {
  double ms = 0;       // device clock (CUDA events) or CPU clock
  double host_ms = 0;  // host wall clock around the same window
};

class SampleTimer {
 public:
  virtual ~SampleTimer() = default;
  // Flushes caches, then times `call` until all work it queued on the device has finished.
  virtual SampleResult time(const std::function<void()>& call) = 0;
  // Runs the worker's own work between timed calls (input copies, poisoning) and waits for it;
  // device activity inside is the harness's, not the model's.
  virtual void harness(const std::function<void()>& call) {
    call();
    synchronize();
  }
  // Waits for all device work; throws DeviceError on a device fault.
  virtual void synchronize() = 0;
  // Copies device memory to the host (CUDA timers only).
  virtual void copy_to_host(void* dst, std::uint64_t src, std::size_t size) = 0;
  virtual nlohmann::json describe() const = 0;
  // Device activity of every timed window so far (CUPTI), or null when not traced.
  virtual nlohmann::json activity() { return nullptr; }
};

// CPU clock; the last-level cache is flushed by writing a buffer twice its size.
std::unique_ptr<SampleTimer> make_cpu_timer();

// CUDA events on the legacy default stream around a device-wide synchronisation; L2 flushed with
// a memset of twice its size; optional CUPTI activity tracing of every sample.
std::unique_ptr<SampleTimer> make_cuda_timer(int device_index, bool trace_activity);

}  // namespace cudal1::worker
