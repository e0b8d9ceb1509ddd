#include "cudal1/common/completion_rate.hpp"

namespace cudal1 {
namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

CompletionRate::CompletionRate() : start_(Clock::now()) {}

void CompletionRate::finished() {
  if (finished_++ == 0) first_finish_ = Clock::now();
}

double CompletionRate::elapsed_s() const {
  return seconds_between(start_, Clock::now());
}

std::optional<double> CompletionRate::eta_s(std::size_t remaining) const {
  if (finished_ == 0 || remaining == 0) return std::nullopt;
  const double per_item = finished_ >= 2 ? seconds_between(first_finish_, Clock::now()) /
                                               static_cast<double>(finished_ - 1)
                                         : elapsed_s();
  return per_item * static_cast<double>(remaining);
}

}  // namespace cudal1
