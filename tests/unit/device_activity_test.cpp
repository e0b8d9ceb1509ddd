// What a device trace's summary counts inside and outside the timed windows, on made-up records:
// work after a window stays outside, records where the trace was suspended are set apart, and a
// window's measured lateness is taken off before records are placed.
#include "device_activity.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace cudal1 {
namespace {

constexpr std::uint64_t kFlushBytes = 1 << 20;

DeviceActivity kernel(std::uint64_t start, std::uint64_t end, const char* name = "k") {
  return {DeviceActivity::Kind::kKernel, name, start, end, 7, 0};
}
DeviceActivity flush(std::uint64_t start, std::uint64_t end) {
  return {DeviceActivity::Kind::kMemset, "", start, end, 7, kFlushBytes};
}

// Two windows, [1000, 2000] and [3000, 4000], each after its flush; a harness interval between.
struct Trace {
  std::vector<DeviceActivity> records;
  std::vector<MarkedSpan> windows = {{1000, 2000}, {3000, 4000}};
  std::vector<bool> traced = {true, true};
  std::vector<MarkedSpan> harness = {{2500, 2800}};
  std::set<std::uint32_t> rotation;
  TraceShift shift;

  nlohmann::json summary() {
    add_flushes(shift, records, 0, kFlushBytes, windows);
    return summarize_activity({records, windows, traced, harness, rotation}, shift, kFlushBytes,
                              "hold");
  }
};

TEST(DeviceActivity, WorkInsideTheWindowsAndTheHarnessIsNotOutside) {
  Trace t;
  t.records = {flush(900, 990), kernel(1100, 1900), kernel(3100, 3950), kernel(2600, 2700, "copy")};
  const auto s = t.summary();
  EXPECT_EQ(s.at("outside_kernels"), 0);
  EXPECT_EQ(s.at("untraced_window_records"), 0);
  EXPECT_EQ(s.at("kernel_time_total_ns"), 800 + 850);
}

TEST(DeviceActivity, WorkAfterAWindowsEndIsOutsideWhateverTheShift) {
  Trace t;
  // The first window's flush ends 100 after its begin mark: that window's records run 100 late.
  // A kernel recorded from 2150 to 2300 truly ran from 2050: after the end mark, outside.
  t.records = {flush(1000, 1100), kernel(1200, 2090), kernel(2150, 2300, "background")};
  const auto s = t.summary();
  EXPECT_EQ(s.at("trace_shift").at("max_ns"), 100);
  EXPECT_EQ(s.at("outside_kernels"), 1);
  EXPECT_EQ(s.at("outside_examples").at(0).at(0), "background");
  // The call's own kernel, recorded as ending 90 after the end mark, is inside once placed.
  EXPECT_EQ(s.at("outside_at_window_end"), 0);
}

TEST(DeviceActivity, WithoutAShiftARecordPastTheEndMarkIsAtTheWindowsEnd) {
  Trace t;
  t.records = {flush(900, 990), kernel(1200, 2090)};
  const auto s = t.summary();
  EXPECT_EQ(s.at("outside_kernels"), 1);
  EXPECT_EQ(s.at("outside_at_window_end"), 1);
  EXPECT_EQ(s.at("outside_overshoot_ns"), 90);
}

TEST(DeviceActivity, RecordsWhereTheTraceWasSuspendedAreSetApartNotOutside) {
  Trace t;
  t.traced = {false, true};
  // In the suspended window: a record that "ends" after its end mark, as seen on an H100.
  t.records = {flush(900, 990), kernel(1500, 2150), kernel(2200, 2300, "after")};
  const auto s = t.summary();
  EXPECT_EQ(s.at("untraced_window_records"), 1);
  // Work after that window's end mark still counts outside.
  EXPECT_EQ(s.at("outside_kernels"), 1);
  EXPECT_EQ(s.at("outside_examples").at(0).at(0), "after");
}

}  // namespace
}  // namespace cudal1
