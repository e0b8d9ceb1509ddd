// The device lock taken from inside a worker, only while the worker uses the device.
//
// During correctness the orchestrator held the device (shared) around each whole call. A call
// that compiles inside forward (load_inline, torch.compile) then kept every timing phase of
// other evaluations waiting for tens of seconds while the device sat idle. With the gate, a CUPTI
// callback sees every CUDA runtime and driver call of the process: the first one that may put
// work on the device (a launch, a copy, a memset, an allocation; not a query or a synchronize)
// waits for the shared hold; once no CUDA call has been made or is in progress for `idle`, the
// gate synchronizes every context the process used and gives the hold back. Between requests,
// threads other than the request loop's wait at the gate until the next request: the
// candidate's background threads cannot reach the device while the worker is idle.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace cudal1::worker {

// Where the shared hold is taken: the turnstile first (a timing phase waiting for exclusive use
// holds it), then the device lock, shared.
struct SharedLockPaths {
  std::filesystem::path lock;
  std::filesystem::path turnstile;
};

// The holds taken since the last report: [from, to] Unix seconds each, and the time spent
// waiting for them.
struct GateHolds {
  nlohmann::json spans = nlohmann::json::array();
  double wait_s = 0;
};

class DeviceGate {
 public:
  virtual ~DeviceGate() = default;
  // A request starts: device work of any thread takes the hold (waiting for it when needed).
  virtual void open(const SharedLockPaths& paths, std::chrono::milliseconds idle) = 0;
  // The request ends: waits briefly for CUDA calls in progress, synchronizes, gives the hold
  // back; other threads' device work waits from now until the next open().
  virtual void close() = 0;
  // The holds since the last call (taken by trial replies).
  virtual GateHolds take_holds() = 0;
  // The gate is off for good (the timing phase, whose exclusive hold the orchestrator takes):
  // every waiting thread passes and no call is watched any more.
  virtual void disable() = 0;
  virtual bool enabled() const = 0;
  // The thread that gives holds back on idle (its CPU use is the gate's, not the candidate's).
  virtual long thread_id() const = 0;
};

// The gate for this process's CUDA device (after the model is loaded); null and `why` where
// CUPTI's callbacks cannot be had (no libcupti, another subscriber such as a profiler).
std::unique_ptr<DeviceGate> make_device_gate(std::string& why);

}  // namespace cudal1::worker
