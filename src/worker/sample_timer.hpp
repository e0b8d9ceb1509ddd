// One timed call of a model, measured the same way on both sides of a comparison.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudal1::worker {

// A device error after which the process's CUDA context is unusable.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a call's time is taken on a GPU.
//  - kWindow: CUDA events around the call and a device-wide synchronisation. The window holds
//    the host side of the call too (Python, launches): for calls of tens of microseconds it
//    measures launch overhead and moves with the host's speed.
//  - kQueued: a kernel holds the default stream while the call queues its work behind it; once
//    released the work runs back to back, and the time is the device span of everything the
//    call queued, on every stream (CUPTI): from the end of the hold (or the start of work the
//    hold did not stop) to the end of the last kernel, copy or memset. Launch overhead is hidden,
//    as in nvbench's cold measurements. A call that waits for the device, or queues more than the
//    stream takes, cannot finish queuing while held: the hold times out and the sample says
//    `held = false`.
enum class TimingMode { kWindow, kQueued };

struct SampleResult {
  double ms = 0;       // the mode's time: device clock (events or CUPTI span) or CPU clock
  double host_ms = 0;  // host wall clock around the same window
  TimingMode mode = TimingMode::kWindow;
  bool held = false;                // kQueued: the whole call was queued while the hold ran
  std::optional<double> kernel_ms;  // sum of kernel durations, when traced
  int kernels = 0;                  // kernels launched, when traced
  // time_deferred(): the window whose trace resolve() still has to read.
  struct Pending {
    std::size_t window = 0;
    bool queued = false;
    bool timed_out = false;  // the hold kernel gave up waiting
  };
  std::optional<Pending> pending;
};

// Whether a window-clock call is traced. CUPTI's kernel records cost the host ~2.5 µs per
// launch (H100, 2026-11-22), which the window clock counts: the GRU example's reference (21 514
// launches) measured 15 % slower traced. Untraced windows keep the trace running outside them,
// so work left behind after a call is still seen. Queued calls are always traced.
enum class WindowTrace { kTraced, kUntraced };

class SampleTimer {
 public:
  virtual ~SampleTimer() = default;
  // Flushes caches, then times `call` until all work it queued on the device has finished.
  // `mode` is a request: a timer that cannot queue (CPU, no CUPTI) times a window.
  virtual SampleResult time(const std::function<void()>& call, TimingMode mode,
                            WindowTrace trace = WindowTrace::kTraced) = 0;
  // As time(), but the activity trace is read later, by resolve(), for a batch of samples at
  // once (one CUPTI flush per batch, not per sample): kernel times, `held` and the queued span
  // are filled in there.
  virtual SampleResult time_deferred(const std::function<void()>& call, TimingMode mode,
                                     WindowTrace trace = WindowTrace::kTraced) {
    return time(call, mode, trace);
  }
  // Completes the results of time_deferred() (in the order they were taken); the device must be
  // idle.
  virtual void resolve(std::vector<SampleResult>& results) { (void)results; }
  // Empty when kQueued can be used, otherwise why not.
  virtual std::string queued_unavailable() const { return "not a GPU"; }
  // Longest the hold waits for the host to queue a call.
  virtual void set_hold_timeout(double ms) { (void)ms; }
  // Runs the worker's own work between timed calls (input copies, poisoning) and waits for it;
  // device activity inside is the harness's, not the model's.
  virtual void harness(const std::function<void()>& call) {
    call();
    synchronize();
  }
  // `count` streams for the calls to run on in turn (TimingConfig::streams), made now (CUstream
  // handles, blocking: work on them waits for the legacy default stream, where the cache flush
  // and the hold run, and the other way round); empty and `why` where there can be none. A
  // process's calls on one stream carry an offset of their own; in turn over several they
  // carry the average.
  virtual std::vector<std::uintptr_t> make_streams(std::size_t count, std::string& why) {
    (void)count;
    why = "not a GPU";
    return {};
  }
  // Waits for all device work; throws DeviceError on a device fault.
  virtual void synchronize() = 0;
  // Copies device memory to the host (CUDA timers only).
  virtual void copy_to_host(void* dst, std::uint64_t src, std::size_t size) = 0;
  // The digest's sum over `words` 8-byte words of device memory at `src` (8-byte aligned; see
  // cudal1/common/digest.hpp), computed where the memory lies once the device's work is done;
  // nullopt where that cannot be done (CPU timers, a kernel the driver cannot load).
  virtual std::optional<std::uint64_t> device_word_sum(std::uint64_t src, std::size_t words) {
    (void)src;
    (void)words;
    return std::nullopt;
  }
  virtual nlohmann::json describe() const = 0;
  // Device activity of every timed window since the last call (CUPTI), or null when not traced.
  // Each call ends a measurement: what it summarised is forgotten.
  virtual nlohmann::json activity() { return nullptr; }
};

// CPU clock; the last-level cache is flushed by writing a buffer twice its size.
std::unique_ptr<SampleTimer> make_cpu_timer();

// CUDA events on the legacy default stream (kWindow) or a hold kernel and CUPTI (kQueued); L2
// flushed with a memset of twice its size; optional CUPTI activity tracing of every sample.
std::unique_ptr<SampleTimer> make_cuda_timer(int device_index, bool trace_activity);

}  // namespace cudal1::worker
