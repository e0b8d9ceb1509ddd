// Every kernel, copy and memset the GPU ran, from CUPTI's activity records (libcupti loaded at
// run time). Timed windows are registered as they happen; records are flushed and attributed to
// windows only when asked, so no CUPTI work happens between one timed call and the next.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cudal1/common/trace_shift.hpp"
#include "device_activity.hpp"

namespace cudal1::worker {

using cudal1::DeviceActivity;

// What the device ran inside one timed window.
struct WindowActivity {
  double kernel_ms = 0;  // sum of kernel durations (the hold kernel excluded)
  int kernels = 0;
  bool held = false;  // the hold kernel ran in the window
  // From the end of the hold kernel (or an earlier start of any other record: work on a stream
  // the hold did not stop) to the end of the last record, on any stream. Null when nothing but
  // the hold ran.
  std::optional<double> span_ms;
};

// dlopen's handle of libcupti (PyTorch's own copy where it is loaded); null and `why` when none.
void* open_cupti_library(std::string& why);

class ActivityTrace {
 public:
  // Starts recording; returns null (and sets `why`) when CUPTI cannot be loaded or enabled.
  static std::unique_ptr<ActivityTrace> start(std::string& why);

  // Stops and restarts recording (windows timed untraced: CUPTI's per-launch cost stays out).
  // Forgets every window and record so far: the next summary covers only what comes after.
  void clear();
  void suspend();
  void resume();
  std::uint64_t timestamp() const;
  // `traced` false: the trace was suspended for the window (the window clock's untraced calls).
  void add_window(std::uint64_t begin_ns, std::uint64_t end_ns, bool traced = true) {
    windows_.push_back({begin_ns, end_ns});
    window_traced_.push_back(traced);
  }
  // An interval of the worker's own device work (input copies, poisoning), not attributed.
  void add_harness(std::uint64_t begin_ns, std::uint64_t end_ns) {
    harness_.push_back({begin_ns, end_ns});
  }
  // Windows registered so far (the index the next one gets).
  std::size_t window_count() const { return windows_.size(); }
  // Flushes CUPTI once and describes every window from `first` on, in order; called after the
  // device is idle. Records are attributed once: a later call sees only newer ones.
  std::vector<WindowActivity> windows_since(std::size_t first, const std::string& hold_kernel);
  // Flushes CUPTI and summarises the windows so far (summarize_activity): over their whole span,
  // what ran outside them (the timer's own cache flush, set_flush_bytes, excepted), the streams
  // used and the kernel names. Records of `hold_kernel` are the timer's own and left out.
  nlohmann::json summarize(const std::string& hold_kernel);
  std::uint64_t dropped_records() const;
  // CUPTI's id of a stream (CUcontext, CUstream), as activity records name it; nullopt when this
  // CUPTI cannot say.
  std::optional<std::uint32_t> stream_id(void* context, void* stream) const;
  // Streams the timer makes current for the calls in turn (TimingConfig::streams): summaries
  // count them apart from the streams a call adds.
  void set_rotation_streams(std::set<std::uint32_t> ids) { rotation_streams_ = std::move(ids); }
  // The size of the timer's cache flush, a memset before each window: what measures how late the
  // trace's timestamps run (TraceShift). Records are placed after that is taken off.
  void set_flush_bytes(std::uint64_t bytes) { flush_bytes_ = bytes; }

 private:
  ActivityTrace() = default;
  using Window = MarkedSpan;
  std::vector<Window> windows_;
  std::vector<bool> window_traced_;  // by window
  std::vector<Window> harness_;
  std::set<std::uint32_t> rotation_streams_;
  void collect();
  std::vector<DeviceActivity> records_;
  std::size_t scanned_ = 0;  // records_ before this index were looked at by windows_since()
  std::uint64_t flush_bytes_ = 0;
  TraceShift shift_;
  std::size_t shift_scanned_ = 0;  // records_ before this index were given to shift_
};

}  // namespace cudal1::worker
