// Evicting the caches before each timed call, so that no call finds its inputs (or the previous
// call's outputs) warm in a cache: every sample starts cold, as the first call of a real run does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#ifdef CUDAL1_HAVE_CUDA
#include "cuda_driver.hpp"
#endif

namespace cudal1::worker {

// The CPU's last-level cache: reading a buffer twice its size.
class HostCacheFlush {
 public:
  HostCacheFlush();
  // Reading (not writing) the buffer leaves the cache full of clean lines: a write pass would
  // leave dirty ones whose write-back the timed call would pay for, at random.
  void run();
  std::size_t bytes() const { return words_.size() * sizeof(std::uint64_t); }

 private:
  std::vector<std::uint64_t> words_;
  volatile std::uint64_t sink_ = 0;
};

#ifdef CUDAL1_HAVE_CUDA
// A GPU's L2: filling a device buffer twice its size on the current stream, and undoing
// persisting-L2 reservations a previous call may have made for its own benefit.
class DeviceCacheFlush {
 public:
  // Allocates the buffer on `device` (the current context's); throws on a driver error.
  DeviceCacheFlush(const CudaDriver& driver, CUdevice device);
  // Queues the flush before the next call; the first failing driver call's result and name.
  CUresult enqueue(const char*& what);
  std::size_t bytes() const { return words_ * 4; }

 private:
  const CudaDriver& driver_;
  CUdeviceptr buffer_ = 0;
  std::size_t words_ = 0;
  unsigned fill_ = 0;  // a new value each time, so no fill is a no-op
};
#endif

}  // namespace cudal1::worker
