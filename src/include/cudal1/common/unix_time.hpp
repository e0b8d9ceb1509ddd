// Durations on the steady clock, and wall-clock time as Unix seconds: what verdicts, queue records
// and caches store as timestamps (comparable between processes, unlike the steady clock).
#pragma once

#include <chrono>

namespace cudal1 {

// Seconds of the steady clock since `start`: durations within one process.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace cudal1
