#include "cache_flush.hpp"

#include <algorithm>
#include <fstream>
#include <string>

namespace cudal1::worker {
namespace {

// Last-level cache size from sysfs; 32 MiB when unknown (larger than most desktop LLCs).
std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text)) break;
    std::size_t value = std::stoull(text);
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    best = std::max(best, value);
  }
  return best > 0 ? best : (32u << 20);
}

// A server's last-level cache is shared by all its cores and can be hundreds of megabytes (300 MiB
// on the CPU machine of 2026-11-27): a read pass over twice that took 80 ms a sample, so a
// 2-second budget timed 7 pairs of a 1 ms call. The pass covers at most 64 MiB of cache; working
// sets beyond that stay partly warm on such a machine, for both sides alike (128 MiB: 17 ms there).
constexpr std::size_t kMaxFlushedCacheBytes = std::size_t{64} << 20;

}  // namespace

HostCacheFlush::HostCacheFlush()
    : words_(2 * std::min(last_level_cache_bytes(), kMaxFlushedCacheBytes) /
             sizeof(std::uint64_t)) {
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] = i * 0x9E3779B97F4A7C15ull;
}

void HostCacheFlush::run() {
  std::uint64_t sum = 0;
  for (std::uint64_t word : words_) sum += word;
  sink_ = sum;
}

#ifdef CUDAL1_HAVE_CUDA
DeviceCacheFlush::DeviceCacheFlush(const CudaDriver& driver, CUdevice device) : driver_(driver) {
  int l2_bytes = 0;
  driver_.check(driver_.cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device),
                "L2 size");
  // Twice the L2 size evicts every line whatever the replacement policy keeps.
  words_ = std::max<std::size_t>(2u * static_cast<std::size_t>(l2_bytes), 1u << 20) / 4;
  driver_.check(driver_.cuMemAlloc(&buffer_, words_ * 4), "allocate L2 flush buffer");
}

CUresult DeviceCacheFlush::enqueue(const char*& what) {
  what = "L2 flush";
  const CUresult filled = driver_.cuMemsetD32Async(buffer_, ++fill_, words_, nullptr);
  if (filled != CUDA_SUCCESS) return filled;
  what = "reset persisting L2";
  return driver_.cuCtxResetPersistingL2Cache();
}
#endif

}  // namespace cudal1::worker
