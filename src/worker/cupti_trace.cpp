#include "cupti_trace.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
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
  shift_scanned_ = add_flushes(shift_, records_, shift_scanned_, flush_bytes_, windows_);
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
    const auto [start, end] = shift_.place(r.start_ns, r.end_ns, windows_);
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

nlohmann::json ActivityTrace::summarize(const std::string& hold_kernel) {
  collect();
  nlohmann::json out =
      summarize_activity({records_, windows_, window_traced_, harness_, rotation_streams_}, shift_,
                         flush_bytes_, hold_kernel);
  out[worker_protocol::activity::kDroppedRecords] = dropped_records();
  return out;
}

}  // namespace cudal1::worker
