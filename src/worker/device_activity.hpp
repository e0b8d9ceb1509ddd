// A device trace's records, the host's marks around timed calls, and what a summary of them says:
// what ran inside the timed windows and what outside. The worker's CUPTI trace
// (src/worker/cupti_trace.cpp) records; this part only reads, so tests can give it made-up records.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cudal1/common/trace_shift.hpp"

namespace cudal1 {

struct DeviceActivity {
  enum class Kind { kKernel, kMemcpy, kMemset };
  Kind kind;
  std::string name;  // kernel name; empty for copies and memsets
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  std::uint32_t stream;
  std::uint64_t bytes;  // copies and memsets
};

// What a trace holds when it is summarised. Windows and harness intervals are ordered and
// disjoint; window_traced[i] is false where the trace was suspended for window i (from before
// its begin mark to after its end mark).
struct ActivityLog {
  const std::vector<DeviceActivity>& records;
  const std::vector<MarkedSpan>& windows;
  const std::vector<bool>& window_traced;
  const std::vector<MarkedSpan>& harness;  // the worker's own device work between calls
  const std::set<std::uint32_t>& rotation_streams;
};

// Gives `shift` the timer's cache flushes (memsets of `flush_bytes`) among records[from...];
// returns records.size(), where the next call starts.
std::size_t add_flushes(TraceShift& shift, const std::vector<DeviceActivity>& records,
                        std::size_t from, std::uint64_t flush_bytes,
                        const std::vector<MarkedSpan>& windows);

// Over the windows' whole span, with each record placed by its window's shift: what ran outside
// the windows (memsets of `ignore_bytes`, the timer's own cache flush, and records of
// `hold_kernel` are the timer's and left out; records inside the harness's intervals are its
// own; records that start inside a window timed with the trace suspended are counted apart, as
// `untraced_window_records`), the streams used, the kernel names and where the windows' kernel
// time went. The keys are worker_protocol::activity's, all but kDroppedRecords.
nlohmann::json summarize_activity(const ActivityLog& log, const TraceShift& shift,
                                  std::uint64_t ignore_bytes, const std::string& hold_kernel);

}  // namespace cudal1
