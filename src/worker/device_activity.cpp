#include "device_activity.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "cudal1/worker/protocol.hpp"

namespace cudal1 {

std::size_t add_flushes(TraceShift& shift, const std::vector<DeviceActivity>& records,
                        std::size_t from, std::uint64_t flush_bytes,
                        const std::vector<MarkedSpan>& windows) {
  for (std::size_t i = from; i < records.size(); ++i) {
    const DeviceActivity& r = records[i];
    if (flush_bytes > 0 && r.kind == DeviceActivity::Kind::kMemset && r.bytes == flush_bytes)
      shift.add_flush(r.start_ns, r.end_ns, windows);
  }
  return records.size();
}

nlohmann::json summarize_activity(const ActivityLog& log, const TraceShift& shift,
                                  std::uint64_t ignore_bytes, const std::string& hold_kernel) {
  namespace key = worker_protocol::activity;
  const std::vector<MarkedSpan>& windows = log.windows;
  const std::vector<MarkedSpan>& harness = log.harness;
  std::set<std::uint32_t> streams, rotation_used;
  std::set<std::string> names;
  // Device time and launches per kernel name inside the timed windows: where a call's time goes.
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> inside_time;
  std::uint64_t total_ns = 0;
  int outside_kernels = 0, outside_copies = 0, at_window_end = 0, before_harness = 0;
  int untraced_window_records = 0;
  // How far before a harness interval's mark a record may start and still be counted as
  // outside_before_harness (a diagnosis: such records are still counted outside).
  constexpr std::uint64_t kHarnessLeadNs = 100000;
  std::uint64_t overshoot_ns = 0;
  nlohmann::json examples = nlohmann::json::array();
  std::optional<std::uint32_t> default_stream;
  const std::uint64_t span_begin = windows.empty() ? 0 : windows.front().begin;
  const std::uint64_t span_end = windows.empty() ? 0 : windows.back().end;
  for (const auto& r : log.records) {
    const auto [start, end] = shift.place(r.start_ns, r.end_ns, windows);
    if (end < span_begin || start > span_end) continue;  // before or after timing
    if (r.kind == DeviceActivity::Kind::kKernel && r.name == hold_kernel) continue;
    if (r.kind == DeviceActivity::Kind::kMemset && r.bytes == ignore_bytes) {
      default_stream = r.stream;  // the timer's flush runs on the legacy default stream
      continue;
    }
    // The harness's own work between calls (ordered, disjoint intervals).
    auto h = std::upper_bound(harness.begin(), harness.end(), start,
                              [](std::uint64_t t, const MarkedSpan& w) { return t < w.begin; });
    if (h != harness.begin() && end <= std::prev(h)->end) continue;
    // Windows are ordered and disjoint: the last one starting at or before the record.
    auto it = std::upper_bound(windows.begin(), windows.end(), start,
                               [](std::uint64_t t, const MarkedSpan& w) { return t < w.begin; });
    const MarkedSpan* before = it != windows.begin() ? &*std::prev(it) : nullptr;
    // The trace was suspended from before this window's begin mark to after its end mark: a
    // record that starts in it is what suspending and resuming left behind, not work of that
    // call's (the false background_work of 2026-11-27 came from window-clock rounds, whose
    // calls mostly run so: kernels that seemed to end after a window's end mark).
    if (before != nullptr && start <= before->end &&
        !log.window_traced[static_cast<std::size_t>(before - windows.data())]) {
      ++untraced_window_records;
      continue;
    }
    const bool inside = before != nullptr && end <= before->end;
    // The timer's rotated streams stand for the current stream of each call: not extra ones.
    (log.rotation_streams.count(r.stream) ? rotation_used : streams).insert(r.stream);
    if (r.kind == DeviceActivity::Kind::kKernel) names.insert(r.name);
    if (!inside) {
      (r.kind == DeviceActivity::Kind::kKernel ? outside_kernels : outside_copies) += 1;
      if (before != nullptr && start <= before->end) {  // started inside, ended after
        ++at_window_end;
        overshoot_ns = std::max(overshoot_ns, end - before->end);
      }
      // Just before the harness's next interval and ending inside it: the harness's own work
      // (an input copy, a poisoning fill) whose recorded start precedes the host's mark.
      const MarkedSpan* next_harness = h != harness.end() ? &*h : nullptr;
      if (next_harness != nullptr && next_harness->begin - start <= kHarnessLeadNs &&
          end <= next_harness->end)
        ++before_harness;
      if (examples.size() < 4 && before != nullptr) {
        examples.push_back({r.name, static_cast<std::int64_t>(start - before->begin),
                            static_cast<std::int64_t>(end) - static_cast<std::int64_t>(before->end),
                            next_harness != nullptr ? nlohmann::json(next_harness->begin - start)
                                                    : nlohmann::json()});
      }
    }
    if (inside && r.kind == DeviceActivity::Kind::kKernel && end > start) {
      auto& [ns, launches] = inside_time[r.name];
      ns += end - start;
      total_ns += end - start;
      ++launches;
    }
  }
  // The kernels that took the most time, longest first (a candidate may launch thousands of
  // distinct ones; their sum is kernel_time_total_ns).
  constexpr std::size_t kTopKernels = 8;
  std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> by_time(
      inside_time.begin(), inside_time.end());
  const auto top =
      by_time.begin() + static_cast<std::ptrdiff_t>(std::min(kTopKernels, by_time.size()));
  std::partial_sort(by_time.begin(), top, by_time.end(),
                    [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json kernel_time = nlohmann::json::array();
  for (auto it = by_time.begin(); it != top; ++it) {
    kernel_time.push_back({{key::kKernelName, it->first},
                           {key::kKernelNs, it->second.first},
                           {key::kKernelLaunches, it->second.second}});
  }
  return {{key::kWindows, windows.size()},
          {key::kOutsideKernels, outside_kernels},
          {key::kOutsideCopies, outside_copies},
          {key::kOutsideAtWindowEnd, at_window_end},
          {key::kOutsideBeforeHarness, before_harness},
          {key::kOutsideOvershootNs, overshoot_ns},
          {key::kOutsideExamples, std::move(examples)},
          {key::kTraceShift, shift.describe()},
          {key::kUntracedWindowRecords, untraced_window_records},
          {key::kStreams, streams},
          {key::kDefaultStream,
           default_stream ? nlohmann::json(*default_stream) : nlohmann::json(nullptr)},
          {key::kKernelNames, names},
          {key::kKernelTime, kernel_time},
          {key::kKernelTimeTotalNs, total_ns},
          {key::kRotationStreams, rotation_used.size()}};
}

}  // namespace cudal1
