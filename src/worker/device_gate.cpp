#include "device_gate.hpp"

#ifdef CUDAL1_HAVE_CUDA
#include <cupti.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "cuda_driver.hpp"
#include "cudal1/common/file_lock.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cupti_trace.hpp"
#endif

namespace cudal1::worker {
#ifdef CUDAL1_HAVE_CUDA
namespace {

using Clock = std::chrono::steady_clock;

// Set on the gate's own thread: its synchronize calls pass the gate.
thread_local bool t_gate_thread = false;

// CUDA calls that put no work on the device and change none of its memory: queries, waits,
// error and version lookups. Every other call of either API waits for the hold.
bool passive(CUpti_CallbackDomain domain, CUpti_CallbackId id) {
  static const std::set<CUpti_CallbackId> driver = {
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetApiVersion,
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetFlags,
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetId,
      CUPTI_DRIVER_TRACE_CBID_cuCtxGetStreamPriorityRange,
      CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
      CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetName,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetPCIBusId,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetUuid,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceGetUuid_v2,
      CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
      CUPTI_DRIVER_TRACE_CBID_cuDeviceTotalMem_v2,
      CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
      CUPTI_DRIVER_TRACE_CBID_cuEventElapsedTime,
      CUPTI_DRIVER_TRACE_CBID_cuEventElapsedTime_v2,
      CUPTI_DRIVER_TRACE_CBID_cuEventQuery,
      CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
      CUPTI_DRIVER_TRACE_CBID_cuGetErrorName,
      CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
      CUPTI_DRIVER_TRACE_CBID_cuGetExportTable,
      CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
      CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
      CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
      CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2,
      CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction,
      CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
      CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetId,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority,
      CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
      CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
      CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
      CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuThreadExchangeStreamCaptureMode,
  };
  static const std::set<CUpti_CallbackId> runtime = {
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetStreamPriorityRange_v5050,
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v12000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorName_v6050,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorString_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemGetInfo_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetPriority_v5050,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
  };
  return (domain == CUPTI_CB_DOMAIN_DRIVER_API ? driver : runtime).count(id) > 0;
}

struct CuptiCallbackApi {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
};

class CuptiGate final : public DeviceGate {
 public:
  explicit CuptiGate(CuptiCallbackApi api) : api_(api), loop_thread_(std::this_thread::get_id()) {}

  // Subscribes (domains off until the first open) and starts the idle watcher.
  std::string start() {
    if (api_.subscribe(&subscriber_, &CuptiGate::callback, this) != CUPTI_SUCCESS) {
      return "cuptiSubscribe failed (another CUPTI subscriber, e.g. a profiler, is active)";
    }
    watcher_ = std::thread([this] { watch(); });
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return watcher_tid_ != 0; });
    return {};
  }

  ~CuptiGate() override {
    disable();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    if (subscriber_ != nullptr) api_.unsubscribe(subscriber_);
  }

  void open(const SharedLockPaths& paths, std::chrono::milliseconds idle) override {
    std::lock_guard<std::mutex> lock(mutex_);
    paths_ = paths;
    idle_ = idle;
    if (!enabled_) {
      api_.enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
      api_.enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
      enabled_ = true;
      in_api_ = 0;  // calls in progress when the domains were enabled report no entry
    }
    open_ = true;
    last_call_ = Clock::now();
    changed_.notify_all();
  }

  void close() override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!enabled_) return;
    open_ = false;  // from now on other threads' device work waits for the next request
    // Calls in progress on other threads (a candidate's background thread) end first; briefly:
    // one that does not return is the call's time limit's business.
    const auto until = Clock::now() + std::chrono::seconds(1);
    while ((in_api_ > 0 || acquiring_) && Clock::now() < until) {
      changed_.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (hold_) give_back(lock, /*may_cancel=*/false);
  }

  GateHolds take_holds() override {
    std::lock_guard<std::mutex> lock(mutex_);
    GateHolds taken = std::move(holds_);
    holds_ = {};
    return taken;
  }

  void disable() override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!enabled_) return;
    enabled_ = false;
    open_ = false;
    changed_.notify_all();
    // Not waiting for a thread that is taking the hold: the orchestrator may hold the device
    // alone by now, and that thread gives the hold back as soon as it has it (see take()).
    if (hold_) give_back(lock, /*may_cancel=*/false);
    lock.unlock();
    api_.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
    api_.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
  }

  bool enabled() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return enabled_;
  }

  long thread_id() const override { return watcher_tid_; }

 private:
  static void CUPTIAPI callback(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                const void* data) {
    if (t_gate_thread) return;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
    static_cast<CuptiGate*>(self)->on_call(domain, id,
                                           static_cast<const CUpti_CallbackData*>(data));
  }

  void on_call(CUpti_CallbackDomain domain, CUpti_CallbackId id, const CUpti_CallbackData* data) {
    const bool active = !passive(domain, id);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!enabled_) return;
    // Only calls that use the device keep the hold: a compiler polling device properties does not.
    if (active) last_call_ = Clock::now();
    if (data->callbackSite == CUPTI_API_EXIT) {
      if (in_api_ > 0) --in_api_;
      return;
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && (id == CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy ||
                                                 id == CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2)) {
      // The context goes away: the gate must not make it current again (both versions' parameters
      // are the context alone).
      const auto* params = static_cast<const cuCtxDestroy_v2_params*>(data->functionParams);
      if (params != nullptr) contexts_.erase(params->ctx);
    } else if (data->context != nullptr) {
      contexts_.insert(data->context);
    }
    if (active) {
      // Threads other than the request loop's wait for a request before any device work.
      if (std::this_thread::get_id() != loop_thread_) {
        changed_.wait(lock, [&] { return open_ || !enabled_; });
        if (!enabled_) return;
      }
      take(lock);
      if (!enabled_) return;
      last_call_ = Clock::now();
    }
    ++in_api_;
  }

  // Returns with the hold taken (or the gate disabled meanwhile).
  void take(std::unique_lock<std::mutex>& lock) {
    while (enabled_ && !hold_) {
      if (acquiring_) {
        changed_.wait(lock, [&] { return !acquiring_ || !enabled_; });
        continue;
      }
      acquiring_ = true;
      const SharedLockPaths paths = paths_;
      lock.unlock();
      const auto start = Clock::now();
      std::optional<FileLock> held;
      {
        const FileLock turnstile = FileLock::acquire(paths.turnstile, true);
        held.emplace(FileLock::acquire_shared(paths.lock, true));
      }
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      lock.lock();
      acquiring_ = false;
      holds_.wait_s += waited;
      if (enabled_) {
        hold_ = std::move(held);
        from_ = unix_now();
      }
      last_call_ = Clock::now();
      changed_.notify_all();
    }
    // A release in progress is called off: this call needs the hold it was giving back.
    if (releasing_) release_cancelled_ = true;
  }

  // Synchronizes every context the process used, then gives the hold back unless a call that
  // needed it came meanwhile (when `may_cancel`).
  void give_back(std::unique_lock<std::mutex>& lock, bool may_cancel) {
    releasing_ = true;
    release_cancelled_ = false;
    const std::set<CUcontext> contexts = contexts_;
    lock.unlock();
    synchronize(contexts);
    lock.lock();
    releasing_ = false;
    if (may_cancel && release_cancelled_) return;
    hold_.reset();
    holds_.spans.push_back({from_, unix_now()});
    changed_.notify_all();
  }

  static void synchronize(const std::set<CUcontext>& contexts) {
    const CudaDriver& driver = CudaDriver::instance();
    for (CUcontext context : contexts) {
      if (driver.cuCtxSetCurrent(context) == CUDA_SUCCESS) driver.cuCtxSynchronize();
    }
  }

  void watch() {
    t_gate_thread = true;
    std::unique_lock<std::mutex> lock(mutex_);
    watcher_tid_ = static_cast<long>(::syscall(SYS_gettid));
    changed_.notify_all();
    while (!stop_) {
      // Asleep while nothing is held (the timing phase above all): no wake-ups beside a sample.
      changed_.wait(lock, [&] { return stop_ || hold_.has_value(); });
      changed_.wait_for(lock, std::chrono::milliseconds(10));
      if (stop_) break;
      if (!hold_ || acquiring_ || releasing_ || in_api_ > 0 || Clock::now() - last_call_ < idle_)
        continue;
      give_back(lock, /*may_cancel=*/true);
    }
  }

  CuptiCallbackApi api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  const std::thread::id loop_thread_;
  std::thread watcher_;
  long watcher_tid_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  bool enabled_ = false;  // the callbacks are on
  bool open_ = false;     // a request is running
  bool acquiring_ = false;
  bool releasing_ = false;
  bool release_cancelled_ = false;
  int in_api_ = 0;  // CUDA calls in progress, on any thread
  Clock::time_point last_call_ = Clock::now();
  std::chrono::milliseconds idle_{250};
  SharedLockPaths paths_;
  std::optional<FileLock> hold_;
  double from_ = 0;
  std::set<CUcontext> contexts_;
  GateHolds holds_;
};

}  // namespace

std::unique_ptr<DeviceGate> make_device_gate(std::string& why) {
  void* library = open_cupti_library(why);
  if (library == nullptr) return nullptr;
  CuptiCallbackApi api;
  api.subscribe = reinterpret_cast<decltype(api.subscribe)>(dlsym(library, "cuptiSubscribe"));
  api.unsubscribe =
      reinterpret_cast<decltype(api.unsubscribe)>(dlsym(library, "cuptiUnsubscribe"));
  api.enable_domain =
      reinterpret_cast<decltype(api.enable_domain)>(dlsym(library, "cuptiEnableDomain"));
  if (!api.subscribe || !api.unsubscribe || !api.enable_domain) {
    why = "libcupti lacks the callback API";
    return nullptr;
  }
  auto gate = std::make_unique<CuptiGate>(api);
  why = gate->start();
  if (!why.empty()) return nullptr;
  return gate;
}
#else
std::unique_ptr<DeviceGate> make_device_gate(std::string& why) {
  why = "cudal1-worker was built without CUDA";
  return nullptr;
}
#endif

}  // namespace cudal1::worker
