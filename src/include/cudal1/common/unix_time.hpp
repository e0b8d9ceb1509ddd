// Wall-clock time as Unix seconds: what verdicts, queue records and caches store as timestamps
// (comparable between processes, unlike the steady clock).
#pragma once

#include <chrono>

namespace cudal1 {

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cudal1
