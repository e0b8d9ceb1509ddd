// How late a device trace's timestamps run, from the timer's cache flush before each window: a
// lower bound per window, never larger for a candidate's memset of the same size.
#include "cudal1/common/trace_shift.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace cudal1 {
namespace {

// Windows of 400 ns every 1000 ns: [1000, 1400], [2000, 2400], [3000, 3400].
std::vector<MarkedSpan> windows() {
  return {{1000, 1400}, {2000, 2400}, {3000, 3400}};
}

TEST(TraceShift, AFlushEndingAfterItsWindowsMarkGivesThatWindowsShift) {
  TraceShift shift;
  const auto w = windows();
  shift.add_flush(900, 980, w);    // before window 0's mark: no shift
  shift.add_flush(1950, 2060, w);  // ends 60 after window 1's mark
  EXPECT_EQ(shift.shift_at(1100, w), 0u);
  // A record of window 1, and one between windows 1 and 2, take window 1's shift.
  EXPECT_EQ(shift.shift_at(2390, w), 60u);
  EXPECT_EQ(shift.shift_at(2600, w), 60u);
  EXPECT_EQ(shift.shift_at(3100, w), 0u);  // window 2 had no flush recorded
  EXPECT_EQ(shift.shift_at(500, w), 0u);   // before the first window
  EXPECT_EQ(shift.describe().at("max_ns"), 60);
  EXPECT_EQ(shift.describe().at("windows"), 1);
}

TEST(TraceShift, AFlushRecordedInsideItsWindowStillMeasuresIt) {
  TraceShift shift;
  const auto w = windows();
  shift.add_flush(2050, 2150, w);  // late enough to start after the mark: placed by its start
  EXPECT_EQ(shift.shift_at(2200, w), 150u);
}

TEST(TraceShift, ASecondMemsetOfTheFlushsSizeMakesTheWindowAmbiguousNotLater) {
  TraceShift shift;
  const auto w = windows();
  shift.add_flush(1950, 1990, w);  // the timer's flush
  shift.add_flush(2100, 2390, w);  // the candidate's own memset of the same size, in its call
  EXPECT_EQ(shift.shift_at(2200, w), 0u);
  EXPECT_EQ(shift.describe().at("ambiguous"), 1);
}

TEST(TraceShift, TheShiftIsCappedAndRecordsBeyondTheLastWindowAreNotPlaced) {
  TraceShift shift(100);
  const auto w = windows();
  shift.add_flush(2950, 3300, w);
  EXPECT_EQ(shift.shift_at(3100, w), 100u);
  shift.add_flush(3500, 3600, w);  // after the last window's end mark
  EXPECT_EQ(shift.describe().at("windows"), 1);
  shift.clear();
  EXPECT_EQ(shift.shift_at(3100, w), 0u);
}

}  // namespace
}  // namespace cudal1
