// The CUDA driver API, loaded at run time (libcuda.so.1) so the worker runs on machines without
// a GPU. Calls go to the same primary context PyTorch uses.
#pragma once

#include <cuda.h>

#include <string>

namespace cudal1::worker {

#define CUDAL1_DRIVER_FUNCTIONS(X)                                                           \
  X(cuInit) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize)     \
  X(cuDevicePrimaryCtxRetain) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDeviceGetName)     \
  X(cuDeviceGetPCIBusId) X(cuDeviceGetUuid) X(cuDriverGetVersion) X(cuGetErrorString)       \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                \
  X(cuEventElapsedTime) X(cuMemAlloc) X(cuMemFree) X(cuMemsetD32Async) X(cuMemcpyDtoH)      \
  X(cuCtxResetPersistingL2Cache)

class CudaDriver {
 public:
  // Loads libcuda and resolves every function; throws std::runtime_error when that fails.
  static const CudaDriver& instance();

#define CUDAL1_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  CUDAL1_DRIVER_FUNCTIONS(CUDAL1_DECLARE_POINTER)
#undef CUDAL1_DECLARE_POINTER

  // Throws std::runtime_error naming `what` and the driver's description of `result`.
  void check(CUresult result, const char* what) const;
  std::string describe(CUresult result) const;

 private:
  CudaDriver();
};

}  // namespace cudal1::worker
