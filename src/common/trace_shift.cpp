#include "cudal1/common/trace_shift.hpp"

#include <algorithm>

namespace cudal1 {

void TraceShift::add_flush(std::uint64_t start, std::uint64_t end,
                           const std::vector<MarkedSpan>& windows) {
  // The first window whose end mark is after the record's start: the record lies between the
  // previous window's end and that one's.
  const auto it = std::upper_bound(windows.begin(), windows.end(), start,
                                   [](std::uint64_t t, const MarkedSpan& w) { return t < w.end; });
  if (it == windows.end()) return;
  const auto index = static_cast<std::size_t>(it - windows.begin());
  if (seen_.size() <= index) seen_.resize(index + 1);
  Seen& seen = seen_[index];
  ++seen.memsets;
  seen.shift = end > it->begin ? std::min(end - it->begin, max_shift_ns_) : 0;
}

std::uint64_t TraceShift::window_shift(std::size_t window) const {
  if (window >= seen_.size() || seen_[window].memsets != 1) return 0;
  return seen_[window].shift;
}

std::uint64_t TraceShift::shift_at(std::uint64_t start,
                                   const std::vector<MarkedSpan>& windows) const {
  const auto it =
      std::upper_bound(windows.begin(), windows.end(), start,
                       [](std::uint64_t t, const MarkedSpan& w) { return t < w.begin; });
  if (it == windows.begin()) return 0;
  return window_shift(static_cast<std::size_t>(it - windows.begin()) - 1);
}

MarkedSpan TraceShift::place(std::uint64_t start, std::uint64_t end,
                             const std::vector<MarkedSpan>& windows) const {
  const std::uint64_t shift = std::min(shift_at(start, windows), start);
  return {start - shift, end - shift};
}

nlohmann::json TraceShift::describe() const {
  std::uint64_t max_ns = 0;
  std::size_t shifted = 0, ambiguous = 0;
  for (std::size_t i = 0; i < seen_.size(); ++i) {
    if (seen_[i].memsets > 1) ++ambiguous;
    const std::uint64_t shift = window_shift(i);
    if (shift > 0) ++shifted;
    max_ns = std::max(max_ns, shift);
  }
  return {{"max_ns", max_ns}, {"windows", shifted}, {"ambiguous", ambiguous}};
}

}  // namespace cudal1
