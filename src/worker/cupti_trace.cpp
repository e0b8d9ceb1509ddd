#include "cupti_trace.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "cudal1/worker/protocol.hpp"

namespace cudal1::worker {
namespace {

#define CUDAL1_CUPTI_FUNCTIONS(X)   \
  X(cuptiActivityRegisterCallbacks) \
  X(cuptiActivityEnable)            \
  X(cuptiActivityDisable)           \
  X(cuptiActivityFlushAll)          \
  X(cuptiActivityGetNextRecord)     \
  X(cuptiGetTimestamp) X(cuptiActivityGetNumDroppedRecords) X(cuptiGetResultString)

struct Cupti {
#define CUDAL1_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  CUDAL1_CUPTI_FUNCTIONS(CUDAL1_DECLARE_POINTER)
#undef CUDAL1_DECLARE_POINTER
  // Optional: only the timer's rotated streams need it.
  decltype(&::cuptiGetStreamIdEx) cuptiGetStreamIdEx = nullptr;
};

Cupti g_cupti;
std::mutex g_records_mutex;
std::vector<DeviceActivity> g_records;

constexpr CUpti_ActivityKind kTracedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

// CUPTI needs 8-byte aligned buffers; 8 MiB holds tens of thousands of kernel records.
constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI request_buffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI complete_buffer(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  std::vector<DeviceActivity> found;
  while (g_cupti.cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        found.push_back({DeviceActivity::Kind::kKernel, k->name ? k->name : "", k->start, k->end,
                         k->streamId, 0});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        found.push_back(
            {DeviceActivity::Kind::kMemcpy, "", m->start, m->end, m->streamId, m->bytes});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        found.push_back(
            {DeviceActivity::Kind::kMemset, "", m->start, m->end, m->streamId, m->bytes});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_records_mutex);
  g_records.insert(g_records.end(), found.begin(), found.end());
}

std::string load_cupti() {
  std::string why;
  void* library = open_cupti_library(why);
  if (library == nullptr) return why;
#define CUDAL1_RESOLVE(name)                                                      \
  g_cupti.name = reinterpret_cast<decltype(g_cupti.name)>(dlsym(library, #name)); \
  if (g_cupti.name == nullptr) return "libcupti lacks " #name;
  CUDAL1_CUPTI_FUNCTIONS(CUDAL1_RESOLVE)
#undef CUDAL1_RESOLVE
  g_cupti.cuptiGetStreamIdEx =
      reinterpret_cast<decltype(g_cupti.cuptiGetStreamIdEx)>(dlsym(library, "cuptiGetStreamIdEx"));
  return {};
}

}  // namespace

void* open_cupti_library(std::string& why) {
  // libcupti.so.13 is found first where PyTorch already loaded its own copy.
  for (const char* name :
       {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) return library;
  }
  why = std::string("cannot load libcupti: ") + dlerror();
  return nullptr;
}

std::unique_ptr<ActivityTrace> ActivityTrace::start(std::string& why) {
  why = load_cupti();
  if (!why.empty()) return nullptr;
  if (g_cupti.cuptiActivityRegisterCallbacks(request_buffer, complete_buffer) != CUPTI_SUCCESS) {
    why = "cuptiActivityRegisterCallbacks failed";
    return nullptr;
  }
  for (auto kind : kTracedKinds) {
    const CUptiResult result = g_cupti.cuptiActivityEnable(kind);
    if (result != CUPTI_SUCCESS) {
      const char* text = nullptr;
      g_cupti.cuptiGetResultString(result, &text);
      why = std::string("cuptiActivityEnable failed: ") + (text ? text : "unknown error");
      return nullptr;
    }
  }
  return std::unique_ptr<ActivityTrace>(new ActivityTrace());
}

void ActivityTrace::suspend() {
  for (auto kind : kTracedKinds) g_cupti.cuptiActivityDisable(kind);
}

void ActivityTrace::resume() {
  for (auto kind : kTracedKinds) g_cupti.cuptiActivityEnable(kind);
}

std::uint64_t ActivityTrace::timestamp() const {
  uint64_t now = 0;
  g_cupti.cuptiGetTimestamp(&now);
  return now;
}

std::optional<std::uint32_t> ActivityTrace::stream_id(void* context, void* stream) const {
  if (g_cupti.cuptiGetStreamIdEx == nullptr) return std::nullopt;
  uint32_t id = 0;
  if (g_cupti.cuptiGetStreamIdEx(static_cast<CUcontext>(context), static_cast<CUstream>(stream), 0,
                                 &id) != CUPTI_SUCCESS) {
    return std::nullopt;
  }
  return id;
}

std::uint64_t ActivityTrace::dropped_records() const {
  size_t dropped = 0;
  g_cupti.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  return dropped;
}

void ActivityTrace::collect() {
  g_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    records_.insert(records_.end(), g_records.begin(), g_records.end());
    g_records.clear();
  }
  // The timer's cache flushes among the new records: how late the timestamps run per window.
  for (; shift_scanned_ < records_.size(); ++shift_scanned_) {
    const DeviceActivity& r = records_[shift_scanned_];
    if (flush_bytes_ > 0 && r.kind == DeviceActivity::Kind::kMemset && r.bytes == flush_bytes_)
      shift_.add_flush(r.start_ns, r.end_ns, windows_);
  }
}

std::pair<std::uint64_t, std::uint64_t> ActivityTrace::placed(const DeviceActivity& r) const {
  const std::uint64_t shift = std::min(shift_.shift_at(r.start_ns, windows_), r.start_ns);
  return {r.start_ns - shift, r.end_ns - shift};
}

std::vector<WindowActivity> ActivityTrace::windows_since(std::size_t first,
                                                         const std::string& hold_kernel) {
  collect();
  first = std::min(first, windows_.size());
  const std::size_t count = windows_.size() - first;
  std::vector<WindowActivity> out(count);
  struct Extent {
    std::optional<std::uint64_t> hold_end, first_start, last_end;
  };
  std::vector<Extent> extents(count);
  const auto begin = windows_.begin() + static_cast<std::ptrdiff_t>(first);
  for (std::size_t i = scanned_; i < records_.size() && count > 0; ++i) {
    const DeviceActivity& r = records_[i];
    const auto [start, end] = placed(r);
    // Windows are ordered and disjoint: the last one starting at or before the record.
    auto it = std::upper_bound(begin, windows_.end(), start,
                               [](std::uint64_t t, const Window& w) { return t < w.begin; });
    if (it == begin || end > std::prev(it)->end) continue;
    const auto index = static_cast<std::size_t>(std::prev(it) - begin);
    Extent& e = extents[index];
    WindowActivity& w = out[index];
    if (r.kind == DeviceActivity::Kind::kKernel && r.name == hold_kernel) {
      e.hold_end = end;
      continue;
    }
    if (r.kind == DeviceActivity::Kind::kKernel) {
      w.kernel_ms += static_cast<double>(end - start) * 1e-6;
      ++w.kernels;
    }
    e.first_start = std::min(e.first_start.value_or(start), start);
    e.last_end = std::max(e.last_end.value_or(end), end);
  }
  scanned_ = records_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const Extent& e = extents[i];
    out[i].held = e.hold_end.has_value();
    if (e.hold_end && e.last_end) {
      const std::uint64_t from = std::min(*e.hold_end, *e.first_start);
      out[i].span_ms = *e.last_end > from ? static_cast<double>(*e.last_end - from) * 1e-6 : 0.0;
    }
  }
  return out;
}

void ActivityTrace::clear() {
  collect();
  records_.clear();
  windows_.clear();
  window_traced_.clear();
  harness_.clear();
  scanned_ = 0;
  shift_.clear();
  shift_scanned_ = 0;
}

nlohmann::json ActivityTrace::summarize(std::uint64_t ignore_bytes,
                                        const std::string& hold_kernel) {
  namespace key = worker_protocol::activity;
  collect();
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
  const std::uint64_t span_begin = windows_.empty() ? 0 : windows_.front().begin;
  const std::uint64_t span_end = windows_.empty() ? 0 : windows_.back().end;
  for (const auto& r : records_) {
    const auto [start, end] = placed(r);
    if (end < span_begin || start > span_end) continue;  // before or after timing
    if (r.kind == DeviceActivity::Kind::kKernel && r.name == hold_kernel) continue;
    if (r.kind == DeviceActivity::Kind::kMemset && r.bytes == ignore_bytes) {
      default_stream = r.stream;  // the timer's flush runs on the legacy default stream
      continue;
    }
    // The harness's own work between calls (ordered, disjoint intervals).
    auto h = std::upper_bound(harness_.begin(), harness_.end(), start,
                              [](std::uint64_t t, const Window& w) { return t < w.begin; });
    if (h != harness_.begin() && end <= std::prev(h)->end) continue;
    // Windows are ordered and disjoint: the last one starting at or before the record.
    auto it = std::upper_bound(windows_.begin(), windows_.end(), start,
                               [](std::uint64_t t, const Window& w) { return t < w.begin; });
    const Window* before = it != windows_.begin() ? &*std::prev(it) : nullptr;
    // The trace was suspended from before this window's begin mark to after its end mark: a
    // record that starts in it is what suspending and resuming left behind, not work of that
    // call's (the false background_work of 2026-11-27 came from window-clock rounds, whose
    // calls mostly run so: kernels that seemed to end after a window's end mark).
    if (before != nullptr && start <= before->end &&
        !window_traced_[static_cast<std::size_t>(before - windows_.data())]) {
      ++untraced_window_records;
      continue;
    }
    const bool inside = before != nullptr && end <= before->end;
    // The timer's rotated streams stand for the current stream of each call: not extra ones.
    (rotation_streams_.count(r.stream) ? rotation_used : streams).insert(r.stream);
    if (r.kind == DeviceActivity::Kind::kKernel) names.insert(r.name);
    if (!inside) {
      (r.kind == DeviceActivity::Kind::kKernel ? outside_kernels : outside_copies) += 1;
      if (before != nullptr && start <= before->end) {  // started inside, ended after
        ++at_window_end;
        overshoot_ns = std::max(overshoot_ns, end - before->end);
      }
      // Just before the harness's next interval and ending inside it: the harness's own work
      // (an input copy, a poisoning fill) whose recorded start precedes the host's mark.
      const Window* next_harness = h != harness_.end() ? &*h : nullptr;
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
  return {{key::kWindows, windows_.size()},
          {key::kOutsideKernels, outside_kernels},
          {key::kOutsideCopies, outside_copies},
          {key::kOutsideAtWindowEnd, at_window_end},
          {key::kOutsideBeforeHarness, before_harness},
          {key::kOutsideOvershootNs, overshoot_ns},
          {key::kOutsideExamples, std::move(examples)},
          {key::kTraceShift, shift_.describe()},
          {key::kUntracedWindowRecords, untraced_window_records},
          {key::kStreams, streams},
          {key::kDefaultStream,
           default_stream ? nlohmann::json(*default_stream) : nlohmann::json(nullptr)},
          {key::kKernelNames, names},
          {key::kKernelTime, kernel_time},
          {key::kKernelTimeTotalNs, total_ns},
          {key::kRotationStreams, rotation_used.size()},
          {key::kDroppedRecords, dropped_records()}};
}

}  // namespace cudal1::worker
