// How long the rest of a batch of items (tasks of a suite) will take, from how fast items
// finish in this process.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

namespace cudal1 {

class CompletionRate {
 public:
  CompletionRate();  // the clock starts now

  void finished();  // one item finished now
  std::size_t count() const { return finished_; }
  double elapsed_s() const;
  // Seconds until `remaining` more items finish; nullopt before the first one has. The pipeline
  // fills first (builds in parallel, replies arriving), then items finish at a steady rate: once
  // two have finished, the rate since the first is the better guide.
  std::optional<double> eta_s(std::size_t remaining) const;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  Clock::time_point first_finish_;
  std::size_t finished_ = 0;
};

}  // namespace cudal1
