#include "sample_timer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache_flush.hpp"
#include "cudal1/worker/protocol.hpp"

#ifdef CUDAL1_HAVE_CUDA
#include <atomic>

#include "cuda_driver.hpp"
#include "cupti_trace.hpp"
#include "digest_kernel.hpp"
#include "hold_kernel.hpp"
#endif

namespace cudal1::worker {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class CpuSampleTimer final : public SampleTimer {
 public:
  SampleResult time(const std::function<void()>& call, TimingMode, WindowTrace) override {
    flush_.run();
    const auto begin = Clock::now();
    call();
    const auto end = Clock::now();
    SampleResult result;
    result.ms = result.host_ms = elapsed_ms(begin, end);
    return result;
  }
  void synchronize() override {}
  void copy_to_host(void*, std::uint64_t, std::size_t) override {
    throw std::runtime_error("no device memory on the CPU");
  }
  nlohmann::json describe() const override {
    namespace key = worker_protocol::timer;
    return {{key::kClock, "steady_clock"}, {key::kFlushBytes, flush_.bytes()}};
  }

 private:
  HostCacheFlush flush_;
};

#ifdef CUDAL1_HAVE_CUDA
class CudaSampleTimer final : public SampleTimer {
 public:
  CudaSampleTimer(int device_index, bool trace_activity) : driver_(CudaDriver::instance()) {
    CUcontext context = nullptr;
    driver_.check(driver_.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
    if (context == nullptr) {
      CUdevice device;
      driver_.check(driver_.cuDeviceGet(&device, device_index), "cuDeviceGet");
      driver_.check(driver_.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
      driver_.check(driver_.cuCtxSetCurrent(context), "cuCtxSetCurrent");
    }
    CUdevice device;
    driver_.check(driver_.cuCtxGetDevice(&device), "cuCtxGetDevice");
    identify(device);
    flush_.emplace(driver_, device);
    driver_.check(driver_.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
    driver_.check(driver_.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
    if (trace_activity) {
      trace_ = ActivityTrace::start(trace_unavailable_);
      if (trace_) trace_->set_flush_bytes(flush_->bytes());
    } else {
      trace_unavailable_ = "disabled";
    }
    load_hold_kernel();
  }

  ~CudaSampleTimer() override {
    if (host_flags_ != nullptr) driver_.cuMemFreeHost(const_cast<std::uint32_t*>(host_flags_));
    for (CUstream stream : streams_) driver_.cuStreamDestroy(stream);
  }

  std::vector<std::uintptr_t> make_streams(std::size_t count, std::string& why) override {
    // The same number again (the timing phase after a calibration): the same streams, whose
    // blocks PyTorch's allocator may still keep.
    if (streams_.size() != count) {
      synchronize();
      for (CUstream stream : streams_) driver_.cuStreamDestroy(stream);
      streams_.clear();
      if (!create_streams(count, why)) return {};
    }
    std::vector<std::uintptr_t> handles;
    for (CUstream stream : streams_) handles.push_back(reinterpret_cast<std::uintptr_t>(stream));
    return handles;
  }

  std::string queued_unavailable() const override {
    if (!trace_) return "no CUPTI activity trace (" + trace_unavailable_ + ")";
    return hold_unavailable_;
  }

  void set_hold_timeout(double ms) override {
    hold_timeout_ns_ = static_cast<std::uint64_t>(std::max(ms, 1.0) * 1e6);
  }

  SampleResult time_deferred(const std::function<void()>& call, TimingMode mode,
                             WindowTrace window_trace) override {
    const char* flush_step = nullptr;
    check_device(flush_->enqueue(flush_step), flush_step);
    synchronize();
    const bool queue = mode == TimingMode::kQueued && queued_unavailable().empty();
    SampleResult result;
    result.mode = queue ? TimingMode::kQueued : TimingMode::kWindow;
    const bool untraced = trace_ && !queue && window_trace == WindowTrace::kUntraced;
    // Outside the host's window too; resumed however the call ends, as the trace must go on
    // watching what runs after it.
    struct Suspend {
      ActivityTrace* trace;
      explicit Suspend(ActivityTrace* t) : trace(t) {
        if (trace) trace->suspend();
      }
      ~Suspend() { end(); }
      void end() {
        if (trace) trace->resume();
        trace = nullptr;
      }
      Suspend(const Suspend&) = delete;
      Suspend& operator=(const Suspend&) = delete;
    } suspended{untraced ? trace_.get() : nullptr};
    const std::uint64_t window_begin = trace_ ? trace_->timestamp() : 0;
    const auto host_begin = Clock::now();
    if (queue) {
      flag(kReleaseSlot) = 0;
      flag(kTimedOutSlot) = 0;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      void* args[] = {&release_device_, &timed_out_device_, &hold_timeout_ns_};
      check_device(driver_.cuLaunchKernel(hold_, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
                   "launch hold kernel");
      check_device(driver_.cuEventRecord(start_, nullptr), "cuEventRecord");
      {
        // Released however the call ends, so a failing call does not leave the stream held.
        struct Release {
          CudaSampleTimer* timer;
          ~Release() {
            timer->flag(kReleaseSlot) = 1;
            std::atomic_thread_fence(std::memory_order_seq_cst);
          }
        } release{this};
        call();
        check_device(driver_.cuEventRecord(stop_, nullptr), "cuEventRecord");
      }
      synchronize();  // every stream, not only the one the events are on
    } else {
      check_device(driver_.cuEventRecord(start_, nullptr), "cuEventRecord");
      call();
      synchronize();
      check_device(driver_.cuEventRecord(stop_, nullptr), "cuEventRecord");
    }
    check_device(driver_.cuEventSynchronize(stop_), "cuEventSynchronize");
    const auto host_end = Clock::now();
    suspended.end();
    float ms = 0;
    check_device(driver_.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
    result.ms = ms;
    result.host_ms = elapsed_ms(host_begin, host_end);
    if (trace_) trace_->add_window(window_begin, trace_->timestamp(), !untraced);
    if (trace_ && !untraced) {  // an untraced window has no records to read
      result.pending = SampleResult::Pending{trace_->window_count() - 1, queue,
                                             queue && flag(kTimedOutSlot) != 0};
    }
    return result;
  }

  SampleResult time(const std::function<void()>& call, TimingMode mode,
                    WindowTrace window_trace) override {
    std::vector<SampleResult> one{time_deferred(call, mode, window_trace)};
    resolve(one);
    return one.front();
  }

  void resolve(std::vector<SampleResult>& results) override {
    std::size_t first = std::numeric_limits<std::size_t>::max();
    for (const auto& r : results) {
      if (r.pending) first = std::min(first, r.pending->window);
    }
    if (!trace_ || first == std::numeric_limits<std::size_t>::max()) return;
    const std::vector<WindowActivity> windows = trace_->windows_since(first, kHoldKernelName);
    for (auto& r : results) {
      if (!r.pending) continue;
      const WindowActivity& activity = windows.at(r.pending->window - first);
      r.kernel_ms = activity.kernel_ms;
      r.kernels = activity.kernels;
      if (r.pending->queued) {
        r.held = activity.held && !r.pending->timed_out;
        if (activity.span_ms) r.ms = *activity.span_ms;
      }
      r.pending.reset();
    }
  }

  void synchronize() override { check_device(driver_.cuCtxSynchronize(), "device synchronize"); }

  void harness(const std::function<void()>& call) override {
    synchronize();
    const std::uint64_t begin = trace_ ? trace_->timestamp() : 0;
    call();
    synchronize();
    if (trace_) trace_->add_harness(begin, trace_->timestamp());
  }

  void copy_to_host(void* dst, std::uint64_t src, std::size_t size) override {
    synchronize();
    check_device(driver_.cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), size), "copy to host");
  }

  std::optional<std::uint64_t> device_word_sum(std::uint64_t src, std::size_t words) override {
    if (!load_digest_kernel()) return std::nullopt;
    synchronize();
    check_device(driver_.cuMemsetD32Async(digest_sum_, 0, 2, nullptr), "clear digest sum");
    if (words > 0) {
      constexpr unsigned kThreads = 256;
      const auto blocks =
          static_cast<unsigned>(std::min<std::size_t>((words + kThreads - 1) / kThreads, 2048));
      CUdeviceptr data = static_cast<CUdeviceptr>(src);
      std::uint64_t count = words;
      void* args[] = {&data, &count, &digest_sum_};
      check_device(
          driver_.cuLaunchKernel(digest_, blocks, 1, 1, kThreads, 1, 1, 0, nullptr, args, nullptr),
          "launch digest kernel");
    }
    std::uint64_t sum = 0;
    check_device(driver_.cuMemcpyDtoH(&sum, digest_sum_, sizeof(sum)), "read digest sum");
    return sum;
  }

  nlohmann::json describe() const override {
    namespace key = worker_protocol::timer;
    nlohmann::json out = identity_;
    out[key::kClock] = "cuda_events";
    out[key::kFlushBytes] = flush_->bytes();
    out[key::kActivityTrace] =
        trace_ ? nlohmann::json("cupti") : nlohmann::json(trace_unavailable_);
    const std::string why_not = queued_unavailable();
    out[key::kQueuedTiming] = why_not.empty() ? nlohmann::json(true) : nlohmann::json(why_not);
    return out;
  }

  nlohmann::json activity() override {
    if (!trace_) return nullptr;
    nlohmann::json summary = trace_->summarize(kHoldKernelName);
    trace_->clear();
    return summary;
  }

 private:
  // Two words of pinned host memory the device reads and writes directly, a cache line apart:
  // the host sets the first to release the hold, the hold kernel sets the second on time-out.
  static constexpr std::size_t kReleaseSlot = 0;
  static constexpr std::size_t kTimedOutSlot = 16;
  volatile std::uint32_t& flag(std::size_t slot) { return host_flags_[slot]; }

  // make_streams()'s streams, their CUPTI ids given to the trace; false (and `why`) when the
  // trace cannot name them.
  bool create_streams(std::size_t count, std::string& why) {
    CUcontext context = nullptr;
    driver_.check(driver_.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
    std::set<std::uint32_t> ids;
    for (std::size_t i = 0; i < count; ++i) {
      CUstream stream = nullptr;
      driver_.check(driver_.cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
      streams_.push_back(stream);
      if (!trace_) continue;
      // The trace must tell them from streams a call adds (the extra-streams check).
      const auto id = trace_->stream_id(context, stream);
      if (!id) {
        why = "this CUPTI cannot name a stream (cuptiGetStreamIdEx)";
        for (CUstream made : streams_) driver_.cuStreamDestroy(made);
        streams_.clear();
        return false;
      }
      ids.insert(*id);
    }
    if (trace_) trace_->set_rotation_streams(ids);
    return true;
  }

  void load_hold_kernel() {
    CUresult r = driver_.cuModuleLoadData(&hold_module_, kHoldKernelPtx);
    if (r == CUDA_SUCCESS) r = driver_.cuModuleGetFunction(&hold_, hold_module_, kHoldKernelName);
    void* pointer = nullptr;
    if (r == CUDA_SUCCESS) {
      r = driver_.cuMemHostAlloc(&pointer, 2 * kTimedOutSlot * sizeof(std::uint32_t),
                                 CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    }
    if (r == CUDA_SUCCESS) {
      host_flags_ = static_cast<volatile std::uint32_t*>(pointer);
      r = driver_.cuMemHostGetDevicePointer(&release_device_, pointer, 0);
      timed_out_device_ = release_device_ + kTimedOutSlot * sizeof(std::uint32_t);
    }
    if (r != CUDA_SUCCESS) hold_unavailable_ = "hold kernel: " + driver_.describe(r);
  }

  // The digest kernel and the word its sum goes to, loaded on first use; false when the driver
  // cannot load it (digests are then taken on the host).
  bool load_digest_kernel() {
    if (digest_ != nullptr) return true;
    if (!digest_unavailable_.empty()) return false;
    CUresult r = driver_.cuModuleLoadData(&digest_module_, kDigestKernelPtx);
    if (r == CUDA_SUCCESS)
      r = driver_.cuModuleGetFunction(&digest_, digest_module_, kDigestKernelName);
    if (r == CUDA_SUCCESS) r = driver_.cuMemAlloc(&digest_sum_, sizeof(std::uint64_t));
    if (r != CUDA_SUCCESS) {
      digest_ = nullptr;
      digest_unavailable_ = "digest kernel: " + driver_.describe(r);
      return false;
    }
    return true;
  }

  // UUID (in NVML's "GPU-..." spelling), PCI address and driver version of the context's device.
  void identify(CUdevice device) {
    CUuuid uuid;
    driver_.check(driver_.cuDeviceGetUuid(&uuid, device), "cuDeviceGetUuid");
    std::string text = "GPU-";
    for (int i = 0; i < 16; ++i) {
      static constexpr char kHex[] = "0123456789abcdef";
      const auto byte = static_cast<unsigned char>(uuid.bytes[i]);
      text += kHex[byte >> 4];
      text += kHex[byte & 15];
      if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
    }
    char bus[32] = {};
    driver_.check(driver_.cuDeviceGetPCIBusId(bus, sizeof(bus), device), "cuDeviceGetPCIBusId");
    int version = 0;
    driver_.check(driver_.cuDriverGetVersion(&version), "cuDriverGetVersion");
    namespace key = worker_protocol::timer;
    identity_ = {{key::kUuid, text}, {key::kPciBusId, bus}, {key::kCudaDriverApi, version}};
    // Read when the context exists, as the driver read it: code loaded later cannot change it.
    const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    identity_[key::kCudaConnections] =
        connections != nullptr ? nlohmann::json(connections) : nlohmann::json();
  }

  void check_device(CUresult result, const char* what) {
    if (result != CUDA_SUCCESS)
      throw DeviceError(std::string(what) + ": " + driver_.describe(result));
  }

  const CudaDriver& driver_;
  std::optional<DeviceCacheFlush> flush_;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  std::vector<CUstream> streams_;  // make_streams()
  CUmodule hold_module_ = nullptr;
  CUfunction hold_ = nullptr;
  volatile std::uint32_t* host_flags_ = nullptr;
  CUdeviceptr release_device_ = 0;
  CUdeviceptr timed_out_device_ = 0;
  std::uint64_t hold_timeout_ns_ = 200'000'000;  // 200 ms until told otherwise
  std::string hold_unavailable_;
  CUmodule digest_module_ = nullptr;
  CUfunction digest_ = nullptr;
  CUdeviceptr digest_sum_ = 0;
  std::string digest_unavailable_;
  std::unique_ptr<ActivityTrace> trace_;
  std::string trace_unavailable_;
  nlohmann::json identity_;
};
#endif

}  // namespace

std::unique_ptr<SampleTimer> make_cpu_timer() {
  return std::make_unique<CpuSampleTimer>();
}

std::unique_ptr<SampleTimer> make_cuda_timer(int device_index, bool trace_activity) {
#ifdef CUDAL1_HAVE_CUDA
  return std::make_unique<CudaSampleTimer>(device_index, trace_activity);
#else
  (void)device_index;
  (void)trace_activity;
  throw std::runtime_error(
      "this cudal1-worker was built without CUDA headers; rebuild on a machine with the CUDA "
      "toolkit");
#endif
}

}  // namespace cudal1::worker
