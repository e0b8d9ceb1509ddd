// The CUDA driver API, loaded at run time (libcuda.so.1) so the worker runs on machines without
// a GPU. Calls go to the same primary context PyTorch uses.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace cudal1::worker {

// Each entry names the ABI version whose prototype is used (cudaTypedefs.h's PFN_<name>_v<N>).
// The version must be explicit: asking for "the newest" gets e.g. CUDA 13's
// cuCtxSynchronize(CUcontext), which takes an argument the old prototype does not pass.
// clang-format off
#define CUDAL1_DRIVER_FUNCTIONS(X)                                              \
  X(cuInit, 2000)                                                               \
  X(cuCtxGetCurrent, 4000)                                                      \
  X(cuCtxSetCurrent, 4000)                                                      \
  X(cuCtxGetDevice, 2000)                                                       \
  X(cuCtxSynchronize, 2000)                                                     \
  X(cuDevicePrimaryCtxRetain, 7000)                                             \
  X(cuDeviceGet, 2000)                                                          \
  X(cuDeviceGetAttribute, 2000)                                                 \
  X(cuDeviceGetName, 2000)                                                      \
  X(cuDeviceGetPCIBusId, 4010)                                                  \
  X(cuDeviceGetUuid, 11040)                                                     \
  X(cuDriverGetVersion, 2020)                                                   \
  X(cuGetErrorString, 6000)                                                     \
  X(cuEventCreate, 2000)                                                        \
  X(cuEventDestroy, 4000)                                                       \
  X(cuEventRecord, 2000)                                                        \
  X(cuEventSynchronize, 2000)                                                   \
  X(cuEventElapsedTime, 2000)                                                   \
  X(cuMemAlloc, 3020)                                                           \
  X(cuMemFree, 3020)                                                            \
  X(cuMemsetD32Async, 3020)                                                     \
  X(cuMemcpyDtoH, 3020)                                                         \
  X(cuMemHostAlloc, 2020)                                                       \
  X(cuMemHostGetDevicePointer, 3020)                                            \
  X(cuMemFreeHost, 2000)                                                        \
  X(cuModuleLoadData, 2000)                                                     \
  X(cuModuleGetFunction, 2000)                                                  \
  X(cuLaunchKernel, 4000)                                                       \
  X(cuStreamCreate, 2000)                                                       \
  X(cuStreamDestroy, 4000)                                                      \
  X(cuCtxResetPersistingL2Cache, 11000)
// clang-format on

class CudaDriver {
 public:
  // Loads libcuda and resolves every function; throws std::runtime_error when that fails.
  static const CudaDriver& instance();

#define CUDAL1_DECLARE_POINTER(name, version) PFN_##name##_v##version name = nullptr;
  CUDAL1_DRIVER_FUNCTIONS(CUDAL1_DECLARE_POINTER)
#undef CUDAL1_DECLARE_POINTER

  // Throws std::runtime_error naming `what` and the driver's description of `result`.
  void check(CUresult result, const char* what) const;
  std::string describe(CUresult result) const;

 private:
  CudaDriver();
};

}  // namespace cudal1::worker
