// How late CUPTI's activity timestamps run against the host's marks, over time and after the
// activity is enabled again (issue 32: can one process's timer serve evaluation after evaluation?).
//
// A probe marks the host's time (cuptiGetTimestamp), sets 1 MiB on the device, synchronizes and
// marks again; the memset's record must lie between the two marks, so record end - second mark
// is how late the trace's clock runs (above 0 is impossible in real time). Each line of output
// is one probe batch as JSON: the phase, seconds since the phase began, and the median and
// largest lateness in µs over its memsets.
//
// Phases: "fresh" (the context made `--idle` seconds before the activity is first enabled, then
// probes every `--every` s for `--fresh` s), "reenabled" (the kinds disabled, flushed and
// enabled again), "finalized" (cuptiFinalize, then callbacks and kinds again).
//
// Build (GPU machine): nvcc -O2 -o /tmp/cupti_drift bench/diag/cupti_drift.cpp
//   -I/usr/local/cuda/extras/CUPTI/include -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Span {
  unsigned long long start, end;
};
std::mutex g_mutex;
std::vector<Span> g_memsets;

void CUPTIAPI request_buffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 4u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI complete_buffer(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      g_memsets.push_back({m->start, m->end});
    }
  }
  std::free(buffer);
}

void check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "%s: %s\n", what, text ? text : "?");
  std::exit(1);
}

void enable() {
  check(cuptiActivityRegisterCallbacks(request_buffer, complete_buffer), "register");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel");
}

void disable() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

// One batch of probes; prints its line.
void probe(const char* phase, double since_s, void* buffer, int count) {
  std::vector<std::pair<unsigned long long, unsigned long long>> marks;
  for (int i = 0; i < count; ++i) {
    uint64_t before = 0, after = 0;
    cuptiGetTimestamp(&before);
    cudaMemsetAsync(buffer, i, 1u << 20);
    cudaDeviceSynchronize();
    cuptiGetTimestamp(&after);
    marks.emplace_back(before, after);
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Span> spans;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    spans.swap(g_memsets);
  }
  std::vector<double> late;
  for (const Span& s : spans) {
    // The probe whose marks hold the record's start best: the last one that began before it.
    auto it = std::upper_bound(marks.begin(), marks.end(), std::make_pair(s.start, ~0ull));
    if (it == marks.begin()) it = marks.begin() + 1;
    late.push_back((static_cast<double>(s.end) - static_cast<double>((it - 1)->second)) / 1e3);
  }
  std::sort(late.begin(), late.end());
  const double median = late.empty() ? 0 : late[late.size() / 2];
  const double largest = late.empty() ? 0 : late.back();
  std::printf(
      "{\"phase\": \"%s\", \"since_s\": %.1f, \"records\": %zu, \"late_us_median\": %.2f, "
      "\"late_us_max\": %.2f}\n",
      phase, since_s, spans.size(), median, largest);
  std::fflush(stdout);
}

void run_phase(const char* phase, double seconds, double every, void* buffer) {
  const auto begin = std::chrono::steady_clock::now();
  for (double next = 0; next <= seconds; next += every) {
    std::this_thread::sleep_until(begin + std::chrono::duration<double>(next));
    const double since =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    probe(phase, since, buffer, 32);
  }
}

double arg(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const double idle = arg(argc, argv, "--idle", 30), fresh = arg(argc, argv, "--fresh", 120);
  const double every = arg(argc, argv, "--every", 10), after = arg(argc, argv, "--after", 20);
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, 1u << 20) != cudaSuccess) return 1;
  cudaDeviceSynchronize();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle));
  enable();
  run_phase("fresh", fresh, every, buffer);
  disable();
  enable();
  run_phase("reenabled", after, every, buffer);
  disable();
  check(cuptiFinalize(), "finalize");
  enable();
  run_phase("finalized", after, every, buffer);
  disable();
  return 0;
}
