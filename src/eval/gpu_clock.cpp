#include "cudal1/eval/gpu_clock.hpp"

#include <dlfcn.h>

#include <mutex>

namespace cudal1 {
namespace {

// The few NVML entry points used here, declared from NVML's documented C API.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
// nvmlMemory_t: bytes.
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*default_app_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  NvmlReturn (*device_count)(unsigned*) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  std::string failure;
};

const Nvml& nvml() {
  static Nvml api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      api.failure = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
      return;
    }
    auto bind = [&](auto& pointer, const char* name) {
      pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(dlsym(library, name));
      if (pointer == nullptr && api.failure.empty())
        api.failure = std::string("NVML lacks ") + name;
    };
    bind(api.init, "nvmlInit_v2");
    bind(api.handle_by_uuid, "nvmlDeviceGetHandleByUUID");
    bind(api.clock_info, "nvmlDeviceGetClockInfo");
    bind(api.max_clock_info, "nvmlDeviceGetMaxClockInfo");
    bind(api.default_app_clock, "nvmlDeviceGetDefaultApplicationsClock");
    bind(api.driver_version, "nvmlSystemGetDriverVersion");
    bind(api.device_count, "nvmlDeviceGetCount_v2");
    bind(api.memory_info, "nvmlDeviceGetMemoryInfo");
    bind(api.error_string, "nvmlErrorString");
    if (api.failure.empty() && api.init() != kNvmlSuccess) api.failure = "nvmlInit failed";
  });
  return api;
}

}  // namespace

std::optional<std::string> nvml_driver_version(std::string& why) {
  const Nvml& api = nvml();
  if (!api.failure.empty()) {
    why = api.failure;
    return std::nullopt;
  }
  char version[96] = {};
  if (api.driver_version(version, sizeof(version)) != kNvmlSuccess) {
    why = "nvmlSystemGetDriverVersion failed";
    return std::nullopt;
  }
  return std::string(version);
}

std::optional<int> nvml_device_count() {
  const Nvml& api = nvml();
  unsigned count = 0;
  if (!api.failure.empty() || api.device_count(&count) != kNvmlSuccess) return std::nullopt;
  return static_cast<int>(count);
}

std::optional<GpuMemory> nvml_device_memory(const std::string& uuid) {
  const Nvml& api = nvml();
  if (!api.failure.empty()) return std::nullopt;
  NvmlDevice device = nullptr;
  if (api.handle_by_uuid(uuid.c_str(), &device) != kNvmlSuccess) return std::nullopt;
  NvmlMemory memory{};
  if (api.memory_info(device, &memory) != kNvmlSuccess) return std::nullopt;
  return GpuMemory{static_cast<double>(memory.free), static_cast<double>(memory.total)};
}

std::unique_ptr<GpuClock> GpuClock::open(const std::string& uuid, std::string& why) {
  const Nvml& api = nvml();
  if (!api.failure.empty()) {
    why = api.failure;
    return nullptr;
  }
  auto clock = std::unique_ptr<GpuClock>(new GpuClock());
  const NvmlReturn found = api.handle_by_uuid(uuid.c_str(), &clock->device_);
  if (found != kNvmlSuccess) {
    why = "NVML does not know GPU " + uuid + ": " + api.error_string(found);
    return nullptr;
  }
  api.max_clock_info(clock->device_, kNvmlClockSm, &clock->max_mhz_);
  unsigned default_mhz = 0;
  const bool has_default =
      api.default_app_clock(clock->device_, kNvmlClockSm, &default_mhz) == kNvmlSuccess;
  clock->reference_mhz_ = has_default && default_mhz > 0 ? default_mhz : clock->max_mhz_;
  char version[96] = {};
  if (api.driver_version(version, sizeof(version)) == kNvmlSuccess) clock->driver_ = version;
  return clock;
}

std::optional<unsigned> GpuClock::sm_mhz() const {
  unsigned mhz = 0;
  if (nvml().clock_info(device_, kNvmlClockSm, &mhz) != kNvmlSuccess) return std::nullopt;
  return mhz;
}

nlohmann::json GpuClock::describe() const {
  return {{"driver", driver_}, {"sm_reference_mhz", reference_mhz_}, {"sm_max_mhz", max_mhz_}};
}

}  // namespace cudal1
