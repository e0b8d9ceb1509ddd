#include "cupti_trace.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace cudal1::worker {
namespace {

#define CUDAL1_CUPTI_FUNCTIONS(X)                                                               \
  X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable) X(cuptiActivityFlushAll)            \
  X(cuptiActivityGetNextRecord) X(cuptiGetTimestamp) X(cuptiActivityGetNumDroppedRecords)      \
  X(cuptiGetResultString)

struct Cupti {
#define CUDAL1_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  CUDAL1_CUPTI_FUNCTIONS(CUDAL1_DECLARE_POINTER)
#undef CUDAL1_DECLARE_POINTER
};

Cupti g_cupti;
std::mutex g_records_mutex;
std::vector<DeviceActivity> g_records;

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
                         k->streamId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        found.push_back({DeviceActivity::Kind::kMemcpy, "", m->start, m->end, m->streamId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        found.push_back({DeviceActivity::Kind::kMemset, "", m->start, m->end, m->streamId});
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
  // libcupti.so.13 is found first where PyTorch already loaded its own copy.
  void* library = nullptr;
  for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}) {
    library = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (library != nullptr) break;
  }
  if (library == nullptr) return std::string("cannot load libcupti: ") + dlerror();
#define CUDAL1_RESOLVE(name)                                                      \
  g_cupti.name = reinterpret_cast<decltype(g_cupti.name)>(dlsym(library, #name)); \
  if (g_cupti.name == nullptr) return "libcupti lacks " #name;
  CUDAL1_CUPTI_FUNCTIONS(CUDAL1_RESOLVE)
#undef CUDAL1_RESOLVE
  return {};
}

}  // namespace

nlohmann::json ActivitySummary::to_json() const {
  return {{"kernels", kernels}, {"copies", copies}, {"busy_ms", busy_ms}, {"span_ms", span_ms},
          {"outside", outside}, {"streams", streams}};
}

std::unique_ptr<ActivityTrace> ActivityTrace::start(std::string& why) {
  why = load_cupti();
  if (!why.empty()) return nullptr;
  if (g_cupti.cuptiActivityRegisterCallbacks(request_buffer, complete_buffer) != CUPTI_SUCCESS) {
    why = "cuptiActivityRegisterCallbacks failed";
    return nullptr;
  }
  for (auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                    CUPTI_ACTIVITY_KIND_MEMSET}) {
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

ActivityTrace::~ActivityTrace() = default;

std::uint64_t ActivityTrace::timestamp() const {
  uint64_t now = 0;
  g_cupti.cuptiGetTimestamp(&now);
  return now;
}

std::uint64_t ActivityTrace::dropped_records() const {
  size_t dropped = 0;
  g_cupti.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  return dropped;
}

ActivitySummary ActivityTrace::collect(std::uint64_t window_begin, std::uint64_t window_end) {
  g_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<DeviceActivity> records;
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    records.swap(g_records);
  }
  ActivitySummary summary;
  std::uint64_t first = 0, last = 0;
  for (const auto& r : records) {
    if (r.start_ns < window_begin || r.end_ns > window_end) {
      ++summary.outside;
      continue;
    }
    if (r.kind == DeviceActivity::Kind::kKernel) {
      ++summary.kernels;
      summary.busy_ms += static_cast<double>(r.end_ns - r.start_ns) * 1e-6;
      kernel_names_.insert(r.name);
    } else {
      ++summary.copies;
    }
    summary.streams.insert(r.stream);
    first = first == 0 ? r.start_ns : std::min(first, r.start_ns);
    last = std::max(last, r.end_ns);
  }
  if (last > first) summary.span_ms = static_cast<double>(last - first) * 1e-6;
  return summary;
}

}  // namespace cudal1::worker
