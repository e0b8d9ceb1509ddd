// Every kernel, copy and memset the GPU ran, from CUPTI's activity records (libcupti loaded at
// run time). The timed window must contain all of them: device work that escapes it is visible.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cudal1::worker {

struct DeviceActivity {
  enum class Kind { kKernel, kMemcpy, kMemset };
  Kind kind;
  std::string name;  // kernel name; empty for copies and memsets
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::uint32_t stream;
};

// What ran on the device during one timed call.
struct ActivitySummary {
  int kernels = 0;
  int copies = 0;        // memcpy + memset
  double busy_ms = 0;    // sum of kernel durations
  double span_ms = 0;    // first start to last end, all activity inside the window
  int outside = 0;       // records not inside [window_begin, window_end]
  std::set<std::uint32_t> streams;

  nlohmann::json to_json() const;
};

class ActivityTrace {
 public:
  // Starts recording; returns null (and sets `why`) when CUPTI cannot be loaded or enabled.
  static std::unique_ptr<ActivityTrace> start(std::string& why);
  ~ActivityTrace();

  std::uint64_t timestamp() const;
  // Flushes CUPTI and summarises every record since the previous call against the window.
  ActivitySummary collect(std::uint64_t window_begin, std::uint64_t window_end);
  // Distinct kernel names seen so far.
  const std::set<std::string>& kernel_names() const { return kernel_names_; }
  std::uint64_t dropped_records() const;

 private:
  ActivityTrace() = default;
  std::set<std::string> kernel_names_;
};

}  // namespace cudal1::worker
