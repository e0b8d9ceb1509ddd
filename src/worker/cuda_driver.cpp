#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace cudal1::worker {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

}  // namespace

CudaDriver::CudaDriver() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr)
    throw std::runtime_error(std::string("cannot load libcuda.so.1: ") + dlerror());
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr)
    throw std::runtime_error("libcuda.so.1 has no cuGetProcAddress_v2 (driver too old)");
    // The legacy default stream variants: it is the stream PyTorch launches on.
#define CUDAL1_RESOLVE(name, version)                                                    \
  {                                                                                      \
    void* pointer = nullptr;                                                             \
    CUdriverProcAddressQueryResult found{};                                              \
    if (get_proc(#name, &pointer, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) != \
            CUDA_SUCCESS ||                                                              \
        pointer == nullptr) {                                                            \
      throw std::runtime_error("the CUDA driver lacks " #name " (ABI " #version ")");    \
    }                                                                                    \
    name = reinterpret_cast<decltype(name)>(pointer);                                    \
  }
  CUDAL1_DRIVER_FUNCTIONS(CUDAL1_RESOLVE)
#undef CUDAL1_RESOLVE
  check(cuInit(0), "cuInit");
}

const CudaDriver& CudaDriver::instance() {
  static const CudaDriver driver;
  return driver;
}

std::string CudaDriver::describe(CUresult result) const {
  const char* text = nullptr;
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  return "CUDA error " + std::to_string(static_cast<int>(result)) + " (" + text + ")";
}

void CudaDriver::check(CUresult result, const char* what) const {
  if (result != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + describe(result));
}

}  // namespace cudal1::worker
