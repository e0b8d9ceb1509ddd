// How late a device trace's timestamps run against the host's marks, window by window, measured
// on the timer's own cache flush (see TraceShift).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace cudal1 {

// A timed window as the host marked it, in the trace's clock (ns).
struct MarkedSpan {
  std::uint64_t begin;
  std::uint64_t end;
};

// Before each timed window the timer flushes the cache (one memset of a known size on the
// default stream) and synchronizes the device, then marks the window's begin: the flush ends
// before that mark. A flush record that ends after it measures how late the trace's timestamps
// run at that window (seen on an H100 in later timing rounds: PyTorch kernels of a call that
// ended up to 151 µs after a window's end mark, which a device-wide synchronize rules out).
//
// Each window's shift is that overshoot, taken only from the one flush-sized memset whose
// recorded start lies between the previous window's end mark and this window's end mark; none
// (0) when there is no such memset or more than one (a candidate's memset of the same size makes
// a window ambiguous, never a larger shift), and at most `max_shift_ns`. Each is a lower bound of
// the true lateness at that window, since the flush ended before the mark: shifting a window's
// records back by it never moves work that ran after the mark inside the window. (Except where
// the lateness exceeds a window's length: the flush's record then falls past its own window, and
// a memset of the same size inside that window could stand for it, up to the cap.)
class TraceShift {
 public:
  explicit TraceShift(std::uint64_t max_shift_ns = 250000) : max_shift_ns_(max_shift_ns) {}

  // A memset of the flush's size recorded at [start, end], against the windows marked so far
  // (ordered, disjoint). A record beyond the last window's end mark is not placed.
  void add_flush(std::uint64_t start, std::uint64_t end, const std::vector<MarkedSpan>& windows);
  // The shift for a record that started at `start`: that of the last window begun at or before
  // it (0 before the first window).
  std::uint64_t shift_at(std::uint64_t start, const std::vector<MarkedSpan>& windows) const;
  // A record's [start, end] with its window's shift taken off.
  MarkedSpan place(std::uint64_t start, std::uint64_t end,
                   const std::vector<MarkedSpan>& windows) const;
  void clear() { seen_.clear(); }
  // {"max_ns", "windows" (with a shift), "ambiguous" (windows with more than one flush-sized
  // memset)}.
  nlohmann::json describe() const;

 private:
  struct Seen {
    int memsets = 0;
    std::uint64_t shift = 0;  // of the one memset, when there is one
  };
  std::uint64_t window_shift(std::size_t window) const;

  std::uint64_t max_shift_ns_;
  std::vector<Seen> seen_;  // by window index
};

}  // namespace cudal1
